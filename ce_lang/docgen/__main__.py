"""`python -m ce_lang.docgen [--check] [--docs DIR]`: write or check docs/reference/."""

from __future__ import annotations

import argparse
import sys

from ce_lang.docgen import IncompleteReference, docs_dir, stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ce_lang.docgen",
        description="Generate docs/reference/*.md from the task schema, the standard "
                    "criteria's .ce definitions, the criteria language and the diagnostic "
                    "codes. Commit the result; --check (run by tests/test_docs.py) fails "
                    "when the committed files differ from what the code says.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each stale or missing file")
    parser.add_argument("--docs", default=docs_dir(),
                        help="the docs directory (default: docs/ of this checkout)")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except IncompleteReference as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.check:
        bad = stale(args.docs)
        for rel in bad:
            print(f"stale: {args.docs}/{rel} (regenerate: python -m ce_lang.docgen)",
                  file=sys.stderr)
        return 1 if bad else 0
    for rel in write(args.docs):
        print(f"wrote {args.docs}/{rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
