"""`ce report`: regenerate a run's report (markdown, JSON, JUnit, HTML, SARIF) from its
parquet."""

from __future__ import annotations

import os
import sys

import click

from ce_runtime.report.render import FORMATS, render


@click.command("report")
@click.argument("run", metavar="RUN")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="md",
              show_default=True, help="md: report.md; json: the run.json summary; junit: "
                                      "JUnit XML; html: the self-contained HTML report; "
                                      "sarif: SARIF 2.1.0, as `ce run --sarif` writes it "
                                      "(task file URIs relative to the current directory).")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False),
              help="Write to this file instead of stdout.")
def report_cmd(run, fmt, output):
    """Regenerate a report of RUN from its results, at any time.

    RUN is a run directory (`runs/latest`, or a directory of runs: its latest), also
    the re-scored results of one (`runs/latest/rescored/<time>`). The report is computed
    from RUN's trials.parquet and results.parquet (and run.json for the suite
    thresholds and the run's arguments): nothing is run or graded again. The HTML
    report also reads each trial's directory (trace, evidence, workspace snapshot) for
    its per-trial detail.

    Exits 0 when the report was written (whatever the run's verdict), 2 when RUN is not
    a run directory, 1 when one of its files is damaged.

    \b
    Examples:
      ce report runs/latest                      report.md on stdout
      ce report runs/latest -f html -o run.html  one file to open in a browser
      ce report runs/latest -f junit -o junit.xml
      ce report runs/latest -f sarif -o ce.sarif   for code scanning, after the run
      ce report runs/latest/rescored/20261201-120000 -f json
    """
    from ce_runtime.cli.pick import say_if_latest
    from ce_runtime.report.rundir import RunDirError

    say_if_latest(run, "report")
    try:
        text = render(run, fmt)
    except RunDirError as exc:
        click.echo(f"ce report: {exc}", err=True)
        sys.exit(2 if exc.usage else 1)
    if output:
        from ce_runtime.cli.archive_guard import clash
        from ce_runtime.store.atomic import write_bytes_atomic

        why = clash(output)
        if why:
            click.echo(f"ce report: -o {output} is {why}: give a path outside the run's "
                       "archive", err=True)
            sys.exit(2)

        parent = os.path.dirname(os.path.abspath(output))
        try:
            os.makedirs(parent, exist_ok=True)
            write_bytes_atomic(output, text.encode())
        except OSError as exc:
            click.echo(f"ce report: cannot write {output}: {exc.strerror or exc}", err=True)
            sys.exit(1)
        click.echo(f"report: {output}", err=True)
    else:
        click.echo(text, nl=False)
