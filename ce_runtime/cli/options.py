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
