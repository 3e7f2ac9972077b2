"""The ce compiler: task YAML with source spans -> typed specs -> resolved, checked plans.

`ce_lang` never imports `ce_runtime` or `ce_agents`; `ce compile` stays fast and standalone.
"""

from ce_lang import attrs_code

__all__ = ["__version__"]
__version__ = "0.1.0"

attrs_code.install()  # before any class of ce is defined
