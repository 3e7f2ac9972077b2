"""Text an agent may have written (file names, command output, its messages), made safe to
show: on a terminal (no escape sequence reaches it: `\\x1b]0;...` would retitle the
window, `\\x1b]52;...` write the clipboard, `\\x1b[2J` wipe what ce printed) and in
Markdown (report.md goes to a CI job's summary page, where `<img src=...>` or `<a>` would
be rendered). Control characters, and the bidirectional overrides that make text read
otherwise than it is, are shown escaped, as Python's repr writes them.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the bidi embeddings, overrides and isolates
_CONTROLS = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{_CONTROLS}]")
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")  # CommonMark: raw HTML and autolinks


def _escaped(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # \x1b, \n, \u202e


def one_line(text: str) -> str:
    """`text` with every control character escaped, newlines and tabs too: a file name
    shown on one line stays one line."""
    return _UNSAFE.sub(_escaped, text)


def terminal(text: str) -> str:
    """`text` for a terminal: its lines and tabs kept, every other control character
    (escape sequences first of all) escaped."""
    return _UNSAFE.sub(lambda m: m.group() if m.group() in "\n\t" else _escaped(m), text)


def md_inline(text: str) -> str:
    """`text` as one Markdown table cell or list item: whitespace runs as one space,
    controls escaped, a `<` that would open a tag or an autolink as `&lt;` (`p < 0.05`
    stays as it is), `](` broken (no inline link or image), `|` escaped."""
    s = _TAG_OPEN.sub("&lt;", one_line(" ".join(str(text).split())))
    return s.replace("](", "]\\(").replace("|", "\\|")
