"""Starter file copied into the sandbox by the guide examples' `template_dir` sources."""


def main():
    pass  # TODO: Implement


if __name__ == "__main__":
    main()
