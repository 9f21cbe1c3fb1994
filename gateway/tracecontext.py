"""W3C Trace Context (https://www.w3.org/TR/trace-context/) for the gateway: pure functions.

Each request through the gateway is a span of a trace: the caller's trace when it sent a valid
`traceparent`, else a new one. The engines get `traceparent` naming the gateway's span as their
parent (and the caller's `tracestate` unchanged), so their spans join the same trace.
"""

from __future__ import annotations

import os
import re

# version "-" trace-id "-" parent-id "-" trace-flags, lowercase hex only (the spec refuses uppercase).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
SAMPLED = "01"


def parse_traceparent(value: str | None) -> tuple[str, str, str] | None:
    """(trace id, parent span id, flags) of a valid `traceparent`, or None when it must be ignored.

    Version 00 is exactly 55 characters. A later version (not ff) is read by its first four fields,
    as the spec asks, provided what follows them starts with "-"."""
    if not value:
        return None
    value = value.strip(" \t")
    found = _TRACEPARENT.match(value)
    if found is None:
        return None
    version, trace_id, parent_id, flags = found.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    if len(value) != 55 and (version == "00" or value[55] != "-"):
        return None
    return trace_id, parent_id, flags


def new_trace_id() -> str:
    found = os.urandom(16).hex()
    return found if found != _ZERO_TRACE else new_trace_id()


def new_span_id() -> str:
    found = os.urandom(8).hex()
    return found if found != _ZERO_SPAN else new_span_id()


def new_ids() -> tuple[str, str]:
    """A new trace id and span id from one read of the system's random source."""
    both = os.urandom(24).hex()
    trace_id, span_id = both[:32], both[32:]
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return new_trace_id(), new_span_id()
    return trace_id, span_id


def format_traceparent(trace_id: str, span_id: str, flags: str = SAMPLED) -> str:
    return f"00-{trace_id}-{span_id}-{flags}"


def valid_tracestate(value: str | None) -> str | None:
    """The caller's `tracestate` to pass on unchanged, or None when absent or over the spec's 512
    characters (a vendor may drop a tracestate it cannot propagate whole)."""
    if not value or len(value) > 512:
        return None
    return value


def upstream_headers(trace_id: str, span_id: str, tracestate: str | None) -> dict[str, str]:
    """The headers to the engines: the gateway's span as their parent, sampled (Tandem decides what it
    keeps when the request ends, so the engines must always record), and the caller's tracestate."""
    headers = {"traceparent": format_traceparent(trace_id, span_id, SAMPLED)}
    if tracestate:
        headers["tracestate"] = tracestate
    return headers
