"""A loopback model server for tests and offline demos: it speaks the Anthropic Messages
API on 127.0.0.1 and answers from a script instead of a model.

Judge requests (non-streaming) get a verdict from the `judge:` list of a replies file
(the first entry whose `match` text occurs in the request's text: its system prompt and
messages, as the model would read them; else the first entry without `match`).

Streaming requests (`stream: true`, what Claude Code sends for an agent_judge) are
answered with Messages-API server-sent events from the `agent_judge:` list: steps of
`{tool: NAME, input: {...}}` or `{text: "..."}`, optionally with `delay: seconds`. The
step is the number of assistant messages in the request (not a counter, so client
retries cannot desynchronize the script); past the end the reply is a text saying so.
`$WORKSPACE` in a step stands for the agent's working directory (Claude Code states it
in its first message), since tools like Read want absolute paths.
Requests without `tools` are side requests (titles and the like): short text, no step.
Also answered: `POST /v1/messages/count_tokens`, `GET /v1/models`, `HEAD /`.
"""

from __future__ import annotations

import json
import re
import threading
import time
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
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                if self.path.split("?")[0].rstrip("/") == "/v1/models":
                    self._json({"data": [{"type": "model", "id": "claude-sonnet-4-6",
                                          "display_name": "loopback",
                                          "created_at": "2025-01-01T00:00:00Z"}],
                                "has_more": False, "first_id": "claude-sonnet-4-6",
                                "last_id": "claude-sonnet-4-6"})
                else:
                    self._json({"type": "error", "error": {"type": "not_found_error",
                                                           "message": self.path}}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?")[0].rstrip("/")
                if path == "/v1/messages/count_tokens":
                    self._json({"input_tokens": max(1, len(request_text(body)) // 4)})
                    return
                server.requests.append(body)
                if body.get("stream"):
                    self._stream(body)
                    return
                text = json.dumps(server.verdict_for(body))
                reply = {"id": f"msg_{len(server.requests)}", "type": "message",
                         "role": "assistant", "model": body.get("model", "loopback"),
                         "content": [{"type": "text", "text": text}],
                         "stop_reason": "end_turn",
                         "usage": {"input_tokens": 10, "output_tokens": 10}}
                self._json(reply)

            def _json(self, obj: Any, status: int = 200) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any]) -> None:
                step = server.step_for(body)
                if step.get("delay"):
                    time.sleep(float(step["delay"]))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                for event in sse_events(step, body.get("model", "loopback"),
                                        len(server.requests)):
                    self.wfile.write(f"event: {event['type']}\ndata: "
                                     f"{json.dumps(event)}\n\n".encode())
                self.wfile.flush()

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

    def step_for(self, body: dict[str, Any]) -> dict[str, Any]:
        """The scripted step a streaming request gets (see the module docstring)."""
        if not body.get("tools"):
            return {"text": "loopback"}
        script = self.replies.get("agent_judge", []) or []
        n = sum(1 for m in body.get("messages", []) or []
                if isinstance(m, dict) and m.get("role") == "assistant")
        if n < len(script):
            cwd = re.search(r"Primary working directory: (\S+)", request_text(body))
            return _substitute(script[n], "$WORKSPACE", cwd.group(1) if cwd else "")
        return {"text": "the loopback script has no more steps"}

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


def sse_events(step: dict[str, Any], model: str, seq: int) -> list[dict[str, Any]]:
    """One assistant message as Messages-API stream events: a text block or a tool_use
    block (its input in a single input_json_delta)."""
    events: list[dict[str, Any]] = [
        {"type": "message_start",
         "message": {"id": f"msg_{seq}", "type": "message", "role": "assistant",
                     "model": model, "content": [], "stop_reason": None,
                     "stop_sequence": None,
                     "usage": {"input_tokens": 10, "output_tokens": 1}}}]
    if "tool" in step:
        block = {"type": "tool_use", "id": f"toolu_{seq:04d}", "name": step["tool"],
                 "input": {}}
        delta = {"type": "input_json_delta",
                 "partial_json": json.dumps(step.get("input", {}))}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": str(step.get("text", ""))}
        stop = "end_turn"
    events += [{"type": "content_block_start", "index": 0, "content_block": block},
               {"type": "content_block_delta", "index": 0, "delta": delta},
               {"type": "content_block_stop", "index": 0},
               {"type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10}},
               {"type": "message_stop"}]
    return events


def _substitute(value: Any, name: str, text: str) -> Any:
    if isinstance(value, str):
        return value.replace(name, text)
    if isinstance(value, list):
        return [_substitute(v, name, text) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, name, text) for k, v in value.items()}
    return value
