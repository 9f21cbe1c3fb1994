"""How many tokens a request may cost at most, reserved against its key's token limits (pure).

The gateway does not tokenize (that would cost the engine's tokenizer on every request), so the
prompt is estimated from the request body: a token per ``BYTES_PER_TOKEN`` bytes of the JSON body
plus ``TEMPLATE_TOKENS`` for the chat template. BPE tokenizers count about four bytes a token in
English and three in code, and the body's JSON (keys, quotes, the model name) only adds bytes, so
the estimate is above the real count for ordinary text and code; a prompt of digits, CJK text or
emoji escaped as ``\\uXXXX`` can count more tokens than estimated, by that difference.

The output's most is the request's own cap: ``max_completion_tokens`` or ``max_tokens`` (chat
and completions), ``max_tokens`` (Anthropic Messages), ``max_output_tokens`` (Responses). When the
model's context length is known, prompt and output together never exceed it (the engine refuses
or clamps beyond it), so the reservation is capped by it, and a request without an output cap
reserves the whole context. When neither is known, only the prompt estimate is reserved.
"""

from __future__ import annotations

from typing import Any

BYTES_PER_TOKEN = 3
TEMPLATE_TOKENS = 16
OUTPUT_CAPS = {
    "/v1/chat/completions": ("max_completion_tokens", "max_tokens"),
    "/v1/completions": ("max_tokens",),
    "/v1/messages": ("max_tokens",),
    "/v1/responses": ("max_output_tokens",),
}


def prompt_estimate(body_bytes: int) -> int:
    return body_bytes // BYTES_PER_TOKEN + TEMPLATE_TOKENS


def output_cap(path: str, request: dict[str, Any]) -> int | None:
    for name in OUTPUT_CAPS.get(path, ()):
        value = request.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def reservation(path: str, request: dict[str, Any] | None, *, body_bytes: int, context: int | None) -> int:
    """The most tokens this request may be charged: what is held against the key's token limits."""
    if path not in OUTPUT_CAPS or request is None:
        return 0
    prompt = prompt_estimate(body_bytes)
    cap = output_cap(path, request)
    if context is not None and context > 0:
        return min(prompt + (cap if cap is not None else context), context)
    return prompt + (cap or 0)


CONTEXT_FLAGS = ("--max-model-len", "--context-length")  # vLLM (and vllm-ascend), SGLang


def context_from_spec(spec: Any) -> int | None:
    """The served context length from the roles' engine arguments (the smallest), or None if unset."""
    roles = spec.get("roles") if isinstance(spec, dict) else None
    found: list[int] = []
    for role in (roles or {}).values():
        args = [str(arg) for arg in (role.get("extra_args") or [])] if isinstance(role, dict) else []
        for index, arg in enumerate(args):
            flag, _, value = arg.partition("=")
            if flag not in CONTEXT_FLAGS:
                continue
            if not value and index + 1 < len(args):
                value = args[index + 1]
            if value.isdigit() and int(value) > 0:
                found.append(int(value))
    return min(found) if found else None
