"""Which variable names say they hold a secret: one rule for the compiler (CE0227, a
pass-through that never passes) and the runtime (redaction of what ce writes, and the
sandboxes' environments, ce_runtime/store/redact.py)."""

from __future__ import annotations

import re

SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|"
    r"PRIVATE|SIGNATURE|DSN|CONNECTION_STRING)", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))
