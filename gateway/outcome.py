"""What the gateway learns about one request while it serves it: the route, who served it (cluster or
fallback), the status, tokens, time to first token and the W3C trace context; read by the recorder, the
key accounting and the trace spans."""

from __future__ import annotations

from dataclasses import dataclass

from gateway import tracecontext
from gateway.routes import RouteEntry


@dataclass
class Outcome:
    model: str = ""
    entry: RouteEntry | None = None
    backend: str = "none"
    status: int = 0
    error_code: str = ""
    stream: bool = False
    started: bool = False  # the response start went to the client: no error body, no fallback now
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None  # prompt tokens from the prefix cache, when the engine reports them
    ttft_ms: float | None = None
    streamed_chunks: int = 0  # chunks of a stream relayed so far (about one token each)
    # A verification probe: it always tries the cluster and neither reads nor moves the breaker that
    # guards applications' requests (a failing probe run must not open it, nor be skipped by it).
    probe: bool = False
    # W3C trace context (gateway.tracecontext): the trace, the gateway's own span in it, the caller's
    # span (its parent; "" when the gateway started the trace) and the caller's tracestate.
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    tracestate: str | None = None

    def trace_headers(self) -> dict[str, str]:
        """`traceparent` (and `tracestate`) for the upstream: the gateway's span as the engine's parent."""
        if not self.trace_id:
            return {}
        return tracecontext.upstream_headers(self.trace_id, self.span_id, self.tracestate)
