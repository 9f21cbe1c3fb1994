"""OpenAI-compatible request parsing and response bodies, shaped like vLLM's."""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass
from typing import Any

from sandbox.engine.tokens import chat_prompt
from sandbox.engine.tools import NO_TOOLS, Tool, ToolChoice, chat_tools, chat_tools_problem

# The vLLM release the simulated engine answers as (realengine/tests/test_conformance.py holds it to it).
VLLM_VERSION = "0.32.0"
FINGERPRINT = f"vllm-{VLLM_VERSION}-{zlib.crc32(b'sandbox'):08x}"


class RequestError(Exception):
    def __init__(
        self, status: int, message: str, param: str | None = None, kind: str = "BadRequestError"
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.kind = kind

    def body(self) -> dict[str, Any]:
        return error_body(self.status, str(self), self.kind, self.param)


def error_body(status: int, message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


@dataclass
class CompletionRequest:
    chat: bool
    model: str
    prompt: str
    max_tokens: int | None
    stream: bool
    include_usage: bool
    kv_transfer_params: dict[str, Any] | None
    api: str = ""  # "messages" or "responses" for those APIs (``sandbox.engine.dialects``)
    instructions: str | None = None  # the Responses API's, echoed in its answer
    ignore_eos: bool = False  # vLLM's extensions: generate to max_tokens / no EOS before min_tokens
    min_tokens: int = 0
    seed: int | None = None
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice = NO_TOOLS
    after_tool_result: bool = False  # the conversation's last message is a tool's result
    echo: dict[str, Any] | None = (
        None  # the Responses API's tools and tool_choice, as its answer repeats them
    )


def parse_request(body: Any, chat: bool, served: tuple[str, ...]) -> CompletionRequest:
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    model = body.get("model")
    if model is not None and model not in served:
        aliases = ", ".join(served)
        raise RequestError(
            404, f"The model `{model}` does not exist. Valid aliases: {aliases}.", "model", "NotFoundError"
        )
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise RequestError(
                400, "messages: Field required (a non-empty list of {role, content} objects)", "messages"
            )
        prompt = chat_prompt(messages)
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and raw and all(isinstance(p, str) for p in raw):
            prompt = " ".join(raw)
        elif isinstance(raw, str):
            prompt = raw
        else:
            raise RequestError(400, "prompt: Field required (a string or a list of strings)", "prompt")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise RequestError(400, f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream: Input should be a valid boolean", "stream")
    options = body.get("stream_options") or {}
    params = body.get("kv_transfer_params")
    if params is not None and not isinstance(params, dict):
        raise RequestError(400, "kv_transfer_params must be an object", "kv_transfer_params")
    if chat and (problem := chat_tools_problem(body)):
        raise RequestError(400, f"{problem[0]} (parameter={problem[1]})", problem[1])
    offered, choice, after = chat_tools(body) if chat else ((), NO_TOOLS, False)
    return CompletionRequest(
        chat=chat,
        model=str(model or served[0]),
        prompt=prompt,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        kv_transfer_params=params,
        **length_controls(body, max_tokens, min_tokens=True),
        tools=offered,
        tool_choice=choice,
        after_tool_result=after,
    )


_TRUE, _FALSE = {"1", "on", "t", "true", "y", "yes"}, {"0", "off", "f", "false", "n", "no"}


def _invalid(name: str, kind: str, message: str, value: Any) -> RequestError:
    """vLLM's answer to a request field of the wrong type (FastAPI's validation error, as it words it)."""
    detail = {"type": kind, "loc": f"body.{name}", "msg": message, "input": value}
    return RequestError(400, f"1 validation error:\n  {detail}", f"body.{name}", "Bad Request")


def _lax_bool(name: str, value: Any) -> bool:
    """A boolean as pydantic reads one: true/false, 0/1, or words like "yes" and "off"."""
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise _invalid(name, "bool_parsing", "Input should be a valid boolean, unable to interpret input", value)


def _lax_int(name: str, value: Any) -> int:
    """An integer as pydantic reads one: an int, an integral float or a string of digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    message = "Input should be a valid integer, unable to parse string as an integer"
    raise _invalid(name, "int_parsing" if isinstance(value, str) else "int_type", message, value)


def length_controls(body: dict[str, Any], max_tokens: int | None, *, min_tokens: bool) -> dict[str, Any]:
    """vLLM's ``ignore_eos``, ``min_tokens`` (the Responses API takes only the first) and ``seed``, checked
    with vLLM 0.32's words."""
    ignore_eos = _lax_bool("ignore_eos", body.get("ignore_eos", False))
    least = _lax_int("min_tokens", body.get("min_tokens", 0)) if min_tokens else 0
    if least < 0:
        raise RequestError(400, f"min_tokens must be greater than or equal to 0, got {least}.")
    if max_tokens is not None and least > max_tokens:
        raise RequestError(
            400, f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {least}."
        )
    seed = body.get("seed")
    return {
        "ignore_eos": ignore_eos,
        "min_tokens": least,
        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
    }


def usage(prompt_tokens: int, completion_tokens: int, details: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": details,
    }


def public_id(request_id: str) -> str:
    """The id vLLM answers with: its request id (already `chatcmpl-<id>`/`cmpl-<id>`) without the
    engine's per-prompt `-0`; never the prefix twice (vLLM 0.32: `chatcmpl-94c2bd3f50017b25`)."""
    return request_id.removesuffix("-0")


def full_response(
    req: CompletionRequest,
    request_id: str,
    text: str,
    finish_reason: str | None,
    usage_body: dict[str, Any],
    kv_params: dict[str, Any] | None,
) -> dict[str, Any]:
    created = int(time.time())
    if req.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        body = {"id": public_id(request_id), "object": "chat.completion", "created": created}
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        body = {"id": public_id(request_id), "object": "text_completion", "created": created}
    body.update(
        {"model": req.model, "choices": [choice], "system_fingerprint": FINGERPRINT, "usage": usage_body}
    )
    if kv_params is not None:
        body["kv_transfer_params"] = kv_params
    return body


class ChunkWriter:
    """Server-sent-event chunks for one streamed completion."""

    def __init__(self, req: CompletionRequest, request_id: str) -> None:
        self.req = req
        self.id = public_id(request_id)
        self.object = "chat.completion.chunk" if req.chat else "text_completion"
        self.created = int(time.time())

    def _event(self, choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.req.model,
            "choices": choices,
        }
        if extra:
            body.update(extra)
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    def opening(self) -> bytes:
        """vLLM's first chat chunk: the role, with empty content (completions have none)."""
        if not self.req.chat:
            return b""
        delta = {"role": "assistant", "content": ""}
        return self._event([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])

    def delta(self, text: str, finish_reason: str | None) -> bytes:
        if self.req.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "delta": {"content": text},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return self._event([choice])

    def closing(self, finish_reason: str | None, usage_body: dict[str, Any]) -> bytes:
        extra = {"usage": usage_body, "system_fingerprint": FINGERPRINT}
        usage_chunk = self._event([], extra) if self.req.include_usage else b""
        return usage_chunk + self.done()

    def error(self, status: int, message: str) -> bytes:
        return b"data: " + json.dumps(error_body(status, message, "InternalServerError")).encode() + b"\n\n"

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"
