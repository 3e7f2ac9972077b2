"""A scripted step in each provider's wire format: the Anthropic Messages API (stream
events and a JSON message) and the OpenAI Chat Completions and Responses APIs (stream
chunks and JSON)."""

from __future__ import annotations

import json
import time
from typing import Any

from ce_runtime.model_server.script import Step


def request_text(body: dict[str, Any]) -> str:
    """What a model would read: system prompt, instructions and every message's text."""
    parts: list[str] = []

    def add(content: Any) -> None:
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    for key in ("text", "content", "output"):
                        if isinstance(block.get(key), str):
                            parts.append(block[key])
                    if isinstance(block.get("content"), list):
                        add(block["content"])

    add(body.get("system"))
    add(body.get("instructions"))
    for message in body.get("messages", []) or []:
        if isinstance(message, dict):
            add(message.get("content"))
    add(body.get("input"))
    return "\n".join(parts)


# -- positions --------------------------------------------------------------------------
def anthropic_position(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) or []
               if isinstance(m, dict) and m.get("role") == "assistant")


def chat_position(body: dict[str, Any]) -> int:
    return anthropic_position(body)


def responses_position(body: dict[str, Any]) -> int:
    """The model's earlier answers in the input: each is a run of the items it produced
    (its message, reasoning and calls: a step with two tool calls is one answer, not
    two), or, for a client that sends only the calls' outputs, a run of those."""
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    answers = outputs = 0
    last = None
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("type") or "message")
        if kind.endswith("_call_output"):
            now = "output"
        elif kind == "reasoning" or kind.endswith("_call") or (
                kind == "message" and item.get("role") == "assistant"):
            now = "answer"
        else:
            now = "input"
        if now != last:
            answers += now == "answer"
            outputs += now == "output"
        last = now
    return max(answers, outputs)


def _usage_anthropic(step: Step) -> dict[str, int]:
    return {k: v for k, v in step.usage.items()}


# -- Anthropic Messages ------------------------------------------------------------------
def anthropic_blocks(step: Step, seq: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if step.text is not None:
        blocks.append({"type": "text", "text": step.text})
    for i, call in enumerate(step.calls):
        blocks.append({"type": "tool_use", "id": f"toolu_{seq:04d}_{i}", "name": call.name,
                       "input": call.input if isinstance(call.input, dict)
                       else {"input": call.input}})
    return blocks


def anthropic_message(step: Step, model: str, seq: int) -> dict[str, Any]:
    return {"id": f"msg_{seq:04d}", "type": "message", "role": "assistant", "model": model,
            "content": anthropic_blocks(step, seq),
            "stop_reason": "tool_use" if step.calls else "end_turn", "stop_sequence": None,
            "usage": _usage_anthropic(step)}


def anthropic_events(step: Step, model: str, seq: int) -> list[dict[str, Any]]:
    usage = _usage_anthropic(step)
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    start_usage["output_tokens"] = 1
    events: list[dict[str, Any]] = [
        {"type": "message_start",
         "message": {"id": f"msg_{seq:04d}", "type": "message", "role": "assistant",
                     "model": model, "content": [], "stop_reason": None,
                     "stop_sequence": None, "usage": start_usage}}]
    for index, block in enumerate(anthropic_blocks(step, seq)):
        if block["type"] == "text":
            events += [{"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]}}]
        else:
            events += [{"type": "content_block_start", "index": index,
                        "content_block": {**block, "input": {}}},
                       {"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": json.dumps(block["input"])}}]
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta",
                "delta": {"stop_reason": "tool_use" if step.calls else "end_turn",
                          "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 0)}},
               {"type": "message_stop"}]
    return events


# -- OpenAI Chat Completions -------------------------------------------------------------
def _openai_usage(step: Step) -> dict[str, Any]:
    """The step's usage as Chat Completions reports it: like the Responses API here,
    `prompt_tokens` is the step's input_tokens, its cached part cache_read_input_tokens."""
    i, o = step.usage.get("input_tokens", 0), step.usage.get("output_tokens", 0)
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o,
            "prompt_tokens_details": {"cached_tokens": step.usage.get(
                "cache_read_input_tokens", 0)}}


def _chat_tool_calls(step: Step, seq: int) -> list[dict[str, Any]]:
    return [{"index": i, "id": f"call_{seq:04d}_{i}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.input)
                          if isinstance(c.input, dict) else c.input}}
            for i, c in enumerate(step.calls)]


def chat_completion(step: Step, model: str, seq: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if step.calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                 for c in _chat_tool_calls(step, seq)]
    return {"id": f"chatcmpl-{seq}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if step.calls
                                         else "stop"}],
            "usage": _openai_usage(step)}


def chat_chunks(step: Step, model: str, seq: int) -> list[dict[str, Any]]:
    base = {"id": f"chatcmpl-{seq}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "finish_reason": None}]}]
    if step.text:
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": step.text},
                                            "finish_reason": None}]})
    if step.calls:
        chunks.append({**base, "choices": [{"index": 0, "delta": {
            "tool_calls": _chat_tool_calls(step, seq)}, "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {},
                                        "finish_reason": "tool_calls" if step.calls
                                        else "stop"}]})
    chunks.append({**base, "choices": [], "usage": _openai_usage(step)})
    return chunks


# -- OpenAI Responses --------------------------------------------------------------------
def response_items(step: Step, seq: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if step.text is not None:
        items.append({"type": "message", "id": f"msg_{seq:04d}", "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": step.text,
                                   "annotations": []}]})
    for i, c in enumerate(step.calls):
        if c.custom:
            items.append({"type": "custom_tool_call", "id": f"ctc_{seq:04d}_{i}",
                          "call_id": f"call_{seq:04d}_{i}", "name": c.name,
                          "input": c.input, "status": "completed"})
        else:
            items.append({"type": "function_call", "id": f"fc_{seq:04d}_{i}",
                          "call_id": f"call_{seq:04d}_{i}", "name": c.name,
                          "arguments": json.dumps(c.input), "status": "completed"})
    return items


def response_object(step: Step, model: str, seq: int, status: str = "completed"
                    ) -> dict[str, Any]:
    i, o = step.usage.get("input_tokens", 0), step.usage.get("output_tokens", 0)
    return {"id": f"resp_{seq:04d}", "object": "response", "created_at": int(time.time()),
            "status": status, "model": model,
            "output": response_items(step, seq) if status == "completed" else [],
            "usage": {"input_tokens": i, "output_tokens": o, "total_tokens": i + o,
                      "input_tokens_details": {"cached_tokens": step.usage.get(
                          "cache_read_input_tokens", 0)},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def response_events(step: Step, model: str, seq: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object(step, model, seq,
                                                                 "in_progress")}]
    for index, item in enumerate(response_items(step, seq)):
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": item})
        if item["type"] == "message":
            events.append({"type": "response.output_text.delta", "output_index": index,
                           "item_id": item["id"], "content_index": 0,
                           "delta": item["content"][0]["text"]})
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
    events.append({"type": "response.completed",
                   "response": response_object(step, model, seq)})
    return events


# -- errors ------------------------------------------------------------------------------
ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error",
                    413: "request_too_large", 429: "rate_limit_error",
                    529: "overloaded_error"}
OPENAI_ERRORS = {400: "invalid_request_error", 401: "invalid_api_key",
                 429: "rate_limit_exceeded"}


def error_body(api: str, status: int, message: str) -> dict[str, Any]:
    """The error an API answers with at this HTTP status."""
    if api == "anthropic":
        return {"type": "error", "error": {"type": ANTHROPIC_ERRORS.get(status, "api_error"),
                                           "message": message}}
    return {"error": {"message": message, "type": OPENAI_ERRORS.get(status, "server_error"),
                      "param": None, "code": None}}
