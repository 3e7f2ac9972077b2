"""Options several commands share, defined once."""

from __future__ import annotations

import math
from typing import Any

import click


def experiment_option(help: str) -> Any:
    """`-e/--experiment FILE` of every command that takes one: given twice, a usage error
    naming both files (click keeps the last silently, and the variants of two files could
    share ids)."""

    def once(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
             ) -> str | None:
        if len(value) > 1:
            raise click.UsageError(
                f"-e/--experiment given {len(value)} times ({', '.join(map(repr, value))}): "
                "a command takes one experiment file; put the variants to compare into one "
                "file", ctx)
        return value[0] if value else None

    return click.option("-e", "--experiment", type=click.Path(dir_okay=False),
                        multiple=True, callback=once, help=help)


class NumberRange(click.FloatRange):
    """click's FloatRange that refuses NaN: NaN passes its bounds (every comparison with
    it is false), and a threshold of NaN then decides nothing (`rate < nan` never holds:
    `--min-pass-rate nan` passed every run)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


# upper bounds of the counts a command line gives: beyond them a value is a typo (an
# extra zero or ten), and one past 2**64 stopped a run already begun (its arguments are
# sent to the report worker as msgpack), leaving run.json "running"
MAX_JOBS = 100_000
MAX_RETRIES = 10  # --retry-errors: more is an outage, not a transient failure
MAX_REPEATS = 10_000  # as the task schema's `repeats` (ce_lang/schema/experiment.py)
MAX_SAMPLE = 1_000_000_000


def count(maximum: int) -> click.IntRange:
    """An option's count: 1 to `maximum`."""
    return click.IntRange(min=1, max=maximum)
