"""`python -m ce_runtime.cli ...` runs the `ce` command."""

from ce_runtime.cli import entry

entry()
