"""A tiny calculator module used by the template_dir example task.

`add` is done; `divide` and `mean` are left for the agent to implement.
"""


def add(a: float, b: float) -> float:
    """Return a + b."""
    return a + b


def divide(a: float, b: float) -> float:
    """Return a / b.

    Raise ValueError("division by zero") when b == 0.
    """
    # TODO: implement divide()
    raise NotImplementedError


def mean(values: list[float]) -> float:
    """Return the arithmetic mean of `values`.

    Raise ValueError("mean of empty list") when `values` is empty.
    """
    # TODO: implement mean()
    raise NotImplementedError
