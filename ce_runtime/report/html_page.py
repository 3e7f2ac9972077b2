"""The HTML report as one self-contained file: the template, stylesheet and script under
`assets/` (package data) with the page's data embedded as JSON elements. No network at view
time: no CDN, no web font, charts drawn as inline SVG by the page's own script.

The table's data is one JSON element (`ce-data`); each trial's detail is its own element
(`ce-d<index>`), parsed only when the trial is opened, so a page of 10,000 trials loads
without parsing every trial's timeline and files.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from ce_runtime.report.html import dumps

_PLACEHOLDER = re.compile(r"\{\{(TITLE|CSS|JS|DATA|DETAILS)\}\}")


def asset(name: str) -> str:
    return resources.files("ce_runtime.report").joinpath("assets", name).read_text("utf-8")


def render_html(data: dict[str, Any]) -> str:
    details = data.get("details") or []
    page = dict(data, details=None, has_details=bool(details))
    parts = [f'<script type="application/json" id="ce-d{i}">{text}</script>'
             for i, text in enumerate(details)]
    title = f"ce run {data.get('run_id')}".replace("&", "&amp;").replace("<", "&lt;")
    fill = {"TITLE": title, "CSS": asset("report.css"), "JS": asset("trial.js") + "\n" + asset("report.js"),
            "DATA": dumps(page), "DETAILS": "\n".join(parts)}
    # one pass over the template: a placeholder inside the data is never replaced
    pieces = _PLACEHOLDER.split(asset("report.html"))
    return "".join(fill[p] if i % 2 else p for i, p in enumerate(pieces))
