"""ce's scripted model server: it speaks the Anthropic Messages API and the OpenAI Chat
Completions and Responses APIs on 127.0.0.1 and answers from a script instead of a model.

It is how ce runs real agent clients (Claude Code, Codex, any OpenAI-compatible agent)
with no model API and no key (`ce run --scripted-model`, `ce model-server`), and how
judges get scripted verdicts (`--judge-replies`). The script format is in `script.py`.

Answered:
- `POST /v1/messages` (stream or JSON): with `tools`, the next scripted step (`steps`,
  or `agent_judge` on a judge's server); without, a side request (a title, a summary):
  a short text that consumes no step. Non-streaming requests on a judge's server get
  the verdict of the first `judge` entry whose `match` occurs in the request.
- `POST /v1/messages/count_tokens`, `GET /v1/models`, `HEAD /`.
- `POST /v1/chat/completions` (stream or JSON) and `POST /v1/responses` (stream or JSON).
A step with `fail` answers with the API's error (an HTTP status), a body that is not the
API's format, or a reply cut off mid-way (see script.py), for testing how agents cope.
Every request is logged (`requests`, and to a JSONL file if asked), with its path and
the step it got.

Stdlib only and free of ce imports (a leaf every stage and the agents may use).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ce_runtime.model_server import wire
from ce_runtime.model_server.script import Fail, Script, ScriptError, Step

__all__ = ["SIMULATED_USER", "ModelServer", "Script", "ScriptError", "request_text"]
request_text = wire.request_text
SIDE_TEXT = "ok"
# the first words of a simulated user's system prompt: such requests get `user_turns`
SIMULATED_USER = "[ce simulated user]"


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client hung up mid-reply (an agent stopped): not the server's fault
        super().handle_error(request, client_address)


class ModelServer:
    """`with ModelServer(script) as server:` serves `script` at `server.url`.

    `judge=True` makes it a judge's server (streams play `agent_judge`, plain requests
    get verdicts); a dict is accepted for a script (the `--judge-replies` file).

    `spent`, when set, is asked before each step of the script is answered: a reason
    (the trial's budget is spent) refuses it with a 400, as a provider refuses an account
    over its spending cap, so an agent that goes on calling while ce stops it (its usage
    reaches ce after its next request, or it calls again in its grace period) gets no
    more steps. A refused request is logged with `refused`, and is not a model call."""

    def __init__(self, script: Script | dict[str, Any], judge: bool = False,
                 port: int = 0, log_path: str | None = None):
        self.script = script if isinstance(script, Script) else Script.from_data(script)
        self.judge = judge
        self.requests: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self._log_path = log_path
        self._lock = threading.Lock()
        self._failures: dict[tuple[str, int], int] = {}  # (api, step) -> failed requests
        self.spent: Callable[[], str | None] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                path = self.path.split("?")[0].rstrip("/")
                if path == "/v1/models":
                    self._json({"object": "list", "data": [
                        {"type": "model", "id": "claude-sonnet-4-6", "object": "model",
                         "display_name": "scripted", "created_at": "2025-01-01T00:00:00Z",
                         "owned_by": "ce"}], "has_more": False,
                        "first_id": "claude-sonnet-4-6", "last_id": "claude-sonnet-4-6"})
                else:
                    self._json({"type": "error", "error": {"type": "not_found_error",
                                                           "message": self.path}}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0) or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._json({"error": {"message": "invalid JSON"}}, 400)
                    return
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/messages/count_tokens"):
                    self._json({"input_tokens": max(1, len(request_text(body)) // 4)})
                    return
                if path.startswith("/model/") and path.endswith("/invoke"):  # Bedrock
                    body.setdefault("model", path.split("/")[2])
                    path = "/v1/messages"
                handler = {"/v1/messages": self._anthropic,
                           "/v1/chat/completions": self._chat,
                           "/v1/responses": self._responses}.get(_normal(path))
                if handler is None:
                    self._json({"error": {"message": f"no such endpoint {self.path}"}}, 404)
                    return
                server.requests.append(body)
                handler(body)

            # -- the three APIs ------------------------------------------------------
            def _anthropic(self, body: dict[str, Any]) -> None:
                model = str(body.get("model", "scripted"))
                if str(body.get("system") or "").startswith(SIMULATED_USER):
                    position = wire.anthropic_position(body)
                    step = Step(server.script.user_turn(position), (), dict(_usage(50, 20)))
                    seq = server._record("simulated-user", body, position, step)
                elif not body.get("tools"):
                    if server.judge and not body.get("stream"):
                        text = request_text(body)
                        step = Step(json.dumps(server.script.verdict(text)), (),
                                    server.script.verdict_usage(text))
                    else:
                        step = Step(SIDE_TEXT, (), dict(_usage(1, 1)))
                    seq = server._record("anthropic", body, None, step)
                else:
                    position = wire.anthropic_position(body)
                    step = server.script.step(position, request_text(body), server.judge)
                    fail = server._refused(position) or \
                        server._fails_now("anthropic", position, step)
                    seq = server._record("anthropic", body, position, step, fail)
                    _wait(step, fail)
                    if fail is not None:
                        self._fail(fail, "anthropic", step, model, seq, body)
                        return
                if body.get("stream"):
                    self._sse([(e["type"], e) for e in wire.anthropic_events(step, model, seq)])
                else:
                    self._json(wire.anthropic_message(step, model, seq))

            def _chat(self, body: dict[str, Any]) -> None:
                model = str(body.get("model", "scripted"))
                if body.get("tools"):
                    position = wire.chat_position(body)
                    step = server.script.step(position, request_text(body))
                elif server.judge:
                    text = request_text(body)
                    position, step = None, Step(json.dumps(server.script.verdict(text)), (),
                                                server.script.verdict_usage(text))
                else:
                    position, step = None, Step(SIDE_TEXT, (), _usage(1, 1))
                fail = server._refused(position) or server._fails_now("chat", position, step)
                seq = server._record("chat", body, position, step, fail)
                _wait(step, fail)
                if fail is not None:
                    self._fail(fail, "chat", step, model, seq, body)
                    return
                if body.get("stream"):
                    self._sse([(None, c) for c in wire.chat_chunks(step, model, seq)],
                              done=True)
                else:
                    self._json(wire.chat_completion(step, model, seq))

            def _responses(self, body: dict[str, Any]) -> None:
                model = str(body.get("model", "scripted"))
                if body.get("tools"):
                    position = wire.responses_position(body)
                    step = server.script.step(position, request_text(body))
                else:
                    position, step = None, Step(SIDE_TEXT, (), _usage(1, 1))
                fail = server._refused(position) or \
                    server._fails_now("responses", position, step)
                seq = server._record("responses", body, position, step, fail)
                _wait(step, fail)
                if fail is not None:
                    self._fail(fail, "responses", step, model, seq, body)
                    return
                if body.get("stream"):
                    self._sse([(e["type"], e) for e in wire.response_events(step, model,
                                                                            seq)])
                else:
                    self._json(wire.response_object(step, model, seq))

            # -- scripted failures ---------------------------------------------------
            def _fail(self, fail: Fail, api: str, step: Step, model: str, seq: int,
                      body: dict[str, Any]) -> None:
                """Answers with the step's failure."""
                stream = bool(body.get("stream"))
                if fail.kind == "garbage":
                    self._raw(200, "text/event-stream" if stream else "application/json",
                              b"data: {not json\n\n" if stream else b"<html>not JSON</html>")
                elif fail.kind == "disconnect":
                    if api == "anthropic":
                        events = [(e["type"], e) for e in wire.anthropic_events(step, model,
                                                                                seq)]
                    elif api == "chat":
                        events = [(None, c) for c in wire.chat_chunks(step, model, seq)]
                    else:
                        events = [(e["type"], e) for e in wire.response_events(step, model,
                                                                               seq)]
                    if stream:  # the head of the stream, then the connection is gone
                        self._sse(events[:max(1, len(events) // 2)], cut=True)
                    else:
                        data = json.dumps(wire.anthropic_message(step, model, seq)).encode()
                        self._raw(200, "application/json", data[:len(data) // 2],
                                  length=len(data))
                else:
                    self._json(wire.error_body(api, fail.status, fail.message), fail.status)

            def _raw(self, status: int, kind: str, data: bytes,
                     length: int | None = None) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data) if length is None
                                                       else length))
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                self.wfile.write(data)
                self.wfile.flush()

            # -- transport -----------------------------------------------------------
            def _json(self, obj: Any, status: int = 200) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[tuple[str | None, dict[str, Any]]],
                     done: bool = False, cut: bool = False) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                for name, event in events:
                    head = f"event: {name}\n" if name else ""
                    self.wfile.write(f"{head}data: {json.dumps(event)}\n\n".encode())
                if done:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                if cut:  # no orderly end: the peer sees the connection reset
                    import socket

                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               b"\x01\x00\x00\x00\x00\x00\x00\x00")

        self._server = _Server(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def _record(self, api: str, body: dict[str, Any], position: int | None,
                step: Step, fail: Fail | None = None) -> int:
        with self._lock:
            seq = len(self.log) + 1
            entry = {"seq": seq, "t": time.time(), "api": api, "model": body.get("model"),
                     "stream": bool(body.get("stream")), "step": position,
                     "tools": len(body.get("tools") or []),
                     "reply": {"text": step.text, "calls": [c.name for c in step.calls]},
                     "usage": step.usage}
            if fail is not None:  # answered with a failure, not the step
                entry["failed"] = fail.status if fail.kind in ("status", "refused") \
                    else fail.kind
                if fail.kind == "refused":
                    entry["refused"] = fail.message
            self.log.append(entry)
            if self._log_path:
                with open(self._log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")
        return seq

    def _refused(self, position: int | None) -> Fail | None:
        """A refusal of this step, when the trial's budget is spent (`spent`)."""
        if position is None or self.spent is None:
            return None
        why = self.spent()
        return None if why is None else Fail(status=400, kind="refused", message=why)

    def _fails_now(self, api: str, position: int | None, step: Step) -> Fail | None:
        """The step's failure, when this request of it is to fail."""
        fail = step.fail
        if fail is None or position is None:
            return None
        with self._lock:
            done = self._failures.get((api, position), 0)
            if fail.times is not None and done >= fail.times:
                return None
            self._failures[(api, position)] = done + 1
        return fail

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _normal(path: str) -> str:
    """`/v1/messages`, also when a client's base URL already ends in /v1."""
    for suffix in ("/v1/messages", "/v1/chat/completions", "/v1/responses"):
        if path.endswith(suffix) or path.endswith(suffix.replace("/v1", "", 1)):
            return suffix
    return path


def _usage(i: int, o: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o}


def _wait(step: Step, fail: Fail | None) -> None:
    """The step's scripted `delay` (a slow model), but for a refusal: a provider refuses
    an account over its cap at once, and the agent is being stopped meanwhile."""
    if step.delay and (fail is None or fail.kind != "refused"):
        time.sleep(step.delay)
