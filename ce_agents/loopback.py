"""A loopback model server for tests and offline demos: it speaks the Anthropic Messages
API on 127.0.0.1 and answers from a script instead of a model.

Judge requests get a verdict from the `judge:` list of a replies file (the first entry
whose `match` text occurs in the request's text: its system prompt and messages, as the
model would read them; else the first entry without `match`).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    def __init__(self, replies: dict[str, Any]):
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                text = json.dumps(server.verdict_for(body))
                reply = {"id": f"msg_{len(server.requests)}", "type": "message",
                         "role": "assistant", "model": body.get("model", "loopback"),
                         "content": [{"type": "text", "text": text}],
                         "stop_reason": "end_turn",
                         "usage": {"input_tokens": 10, "output_tokens": 10}}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def verdict_for(self, body: dict[str, Any]) -> dict[str, Any]:
        text = request_text(body)
        default = None
        for entry in self.replies.get("judge", []):
            match = entry.get("match")
            if match is None and default is None:
                default = entry
            elif match is not None and match in text:
                return {"score": entry["score"], "rationale": entry.get("rationale", "")}
        if default is None:
            return {"rationale": "no scripted verdict matches this request"}
        return {"score": default["score"], "rationale": default.get("rationale", "")}

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def request_text(body: dict[str, Any]) -> str:
    """The text a model would read: the system prompt and every message's text blocks."""
    parts: list[str] = []

    def add(content: Any) -> None:
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    parts.append(block["text"])

    add(body.get("system"))
    for message in body.get("messages", []) or []:
        if isinstance(message, dict):
            add(message.get("content"))
    return "\n".join(parts)
