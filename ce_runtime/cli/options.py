"""Options several commands share, defined once."""

from __future__ import annotations

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
