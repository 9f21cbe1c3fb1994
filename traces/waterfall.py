"""A kept trace as a waterfall: the gateway's span, the router's, each engine's broken into queue,
prefill and decode from vLLM's `llm_request` attributes, and a named reason for every hop that sent
no span. Pure: rows in, rows out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ROUTER_SERVICES = ("router", "kthena", "vllm-router", "sglang-router")
GATEWAY_SERVICE = "tandem-gateway"
PHASES = (
    ("queue", "gen_ai.latency.time_in_queue"),
    ("prefill", "gen_ai.latency.time_in_model_prefill"),
    ("decode", "gen_ai.latency.time_in_model_decode"),
)
KV_KEYS = ("gen_ai.latency.kv_transfer", "kv_transfer.seconds", "tandem.kv_transfer_seconds")
# Why an engine with tracing on sent no span, per engine (docs/traces.md says what each exports).
UNSENT = {
    "vllm": "tracing off or endpoint unreachable (check the engine's log for 'Failed to export')",
    "vllm-ascend": "tracing off or endpoint unreachable (check the engine's log for 'Failed to export')",
    "sglang": "tracing off, the opentelemetry packages missing from its image, or the endpoint unreachable "
    "(check the engine's log for 'initialize opentelemetry error')",
    "mindie": "msServiceProfiler's forwarder (the ms-trace-forwarder container) did not export: check its "
    "log, and that the image carries msServiceProfiler; MindIE traces only /v1/chat/completions and "
    "/v1/completions",
}
KV_NOTE = {
    "vllm": "KV transfer is not reported as a span by vLLM: on the decode it is inside the queue time "
    "(the request waits there for the prefill's KV).",
    "sglang": "SGLang's spans carry its own names (no queue/prefill/decode attributes as vLLM's): they are "
    "shown as sent; KV transfer is one of them only with the mooncake trace module (tracing.mode "
    "detailed).",
    "mindie": "MindIE's span (msServiceProfiler's server.Request) holds the request's time and HTTP "
    "details only: no queue, prefill, decode or KV transfer split, no token counts.",
}


@dataclass(frozen=True)
class SpanRow:
    span_id: str
    parent_span_id: str
    name: str
    service_name: str
    instance: str
    start: datetime
    end: datetime
    status_code: int
    attributes: dict[str, Any]


@dataclass
class Bar:
    label: str
    hop: str  # gateway | router | prefill | decode | engine | other
    instance: str
    offset_ms: float
    duration_ms: float
    depth: int
    error: bool = False
    detail: str = ""
    # (phase, start %, width %) on the trace's axis: queue, prefill and decode from vLLM's attributes
    segments: list[tuple[str, float, float]] = field(default_factory=list)
    left_pct: float = 0.0
    width_pct: float = 0.0


@dataclass
class Waterfall:
    total_ms: float
    bars: list[Bar]
    missing: list[str]
    tokens: dict[str, int | None]
    source: str = ""  # where the engines' spans were read when not from Tandem's store ("Tempo at URL")
    store_error: str = ""  # why the cluster's trace store could not be read


def role_of(span: SpanRow, engines: int) -> str:
    role = str(span.attributes.get("tandem.role") or "")
    if role in ("prefill", "decode"):
        return role
    for name in ("prefill", "decode"):
        if name in span.instance or name in span.service_name:
            return name
    if engines > 1:  # P/D: the prefill is asked for one token (vLLM's disaggregation proxy, routers)
        return "prefill" if int(span.attributes.get("gen_ai.usage.completion_tokens") or 0) <= 1 else "decode"
    return "engine"


def _seconds(value: Any) -> float:
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return 0.0


def _hop(span: SpanRow, engines: int) -> str:
    if span.service_name == GATEWAY_SERVICE:
        return "gateway"
    if span.name == "llm_request":
        return role_of(span, engines)
    if any(word in span.service_name for word in ROUTER_SERVICES):
        return "router"
    return "other"


def _engine_detail(span: SpanRow) -> str:
    a = span.attributes
    parts = [f"{label} {_seconds(a.get(key)) * 1000:,.0f} ms" for label, key in PHASES if key in a]
    if "gen_ai.usage.prompt_tokens" in a:
        parts.append(f"prompt {a['gen_ai.usage.prompt_tokens']} tokens")
    if "gen_ai.usage.completion_tokens" in a:
        parts.append(f"output {a['gen_ai.usage.completion_tokens']}")
    return ", ".join(parts)


def _missing(
    hops: set[str], *, engine: str, tracing: str, has_router: bool, backend: str, status: int
) -> list[str]:
    out = []
    if backend == "fallback":
        out.append("The fallback upstream answered: it is outside the cluster and sends Tandem no spans.")
        return out
    if backend == "none" or status == 0:
        out.append("The request reached no engine, so no engine span exists.")
        return out
    if has_router and "router" not in hops:
        out.append(
            "The router exports no spans (the Kthena router and the sandbox's router have no OTLP export): "
            "its time is the gap between the gateway's start and the engines' start."
        )
    for role in ("prefill", "decode"):
        if role in hops or ("engine" in hops and role == "decode"):
            continue
        if tracing == "off":
            why = "tracing is off for this topology (set tracing.mode to on in its spec)"
        else:
            why = UNSENT.get(engine, UNSENT["vllm"])
        out.append(f"The {role} engine sent no span: {why}.")
    out.append(KV_NOTE.get(engine, KV_NOTE["vllm"]))
    return out


def build(
    trace: dict[str, Any], spans: list[SpanRow], *, engine: str, tracing: str, has_router: bool
) -> Waterfall:
    """Bars placed on one time axis (the earliest span's start is 0) and the hops that sent nothing."""
    engines = sum(1 for s in spans if s.name == "llm_request")
    origin = min((s.start for s in spans), default=None)
    by_id = {s.span_id: s for s in spans}
    bars: list[Bar] = []
    hops: set[str] = set()
    for span in sorted(spans, key=lambda s: (s.service_name != GATEWAY_SERVICE, s.start)):
        assert origin is not None
        hop = _hop(span, engines)
        hops.add(hop)
        role = span.attributes.get("tandem.role")
        if hop == "other" and role in ("prefill", "decode"):
            hops.add(str(role))  # an engine's own span (SGLang's, MindIE's): that engine sent one
        depth, parent = 0, by_id.get(span.parent_span_id)
        while parent is not None and depth < 8:
            depth += 1
            parent = by_id.get(parent.parent_span_id)
        offset = (span.start - origin).total_seconds() * 1000
        duration = max(0.0, (span.end - span.start).total_seconds() * 1000)
        bar = Bar(
            label=span.name
            if hop in ("other", "router")
            else f"{hop} engine"
            if hop != "gateway"
            else "gateway",
            hop=hop,
            instance=span.instance or span.service_name,
            offset_ms=offset,
            duration_ms=duration,
            depth=depth,
            error=span.status_code == 2,
        )
        if span.name == "llm_request":
            bar.detail = _engine_detail(span)
            for phase, key in (*PHASES, *(("kv", k) for k in KV_KEYS)):
                length = _seconds(span.attributes.get(key)) * 1000
                if length:
                    bar.segments.append((phase, 0.0, length))  # placed on the axis below
        elif hop == "gateway":
            bar.detail = f"status {trace.get('status')}, via {trace.get('backend')}"
        bars.append(bar)
    total = max((b.offset_ms + b.duration_ms for b in bars), default=0.0) or 1.0
    for bar in bars:
        bar.left_pct = round(100 * bar.offset_ms / total, 2)
        bar.width_pct = round(max(0.4, 100 * bar.duration_ms / total), 2)
        at, placed = bar.left_pct, []
        for phase, _, length in bar.segments:  # on the trace's axis: % of the whole trace
            width = round(100 * length / total, 2)
            placed.append((phase, at if phase != "kv" else bar.left_pct, width))
            at = round(at + width, 2) if phase != "kv" else at
        bar.segments = placed
    missing = _missing(
        hops,
        engine=engine,
        tracing=tracing,
        has_router=has_router,
        backend=str(trace.get("backend", "")),
        status=int(trace.get("status") or 0),
    )
    prompt = trace.get("prompt_tokens")
    tokens = {
        "prompt": prompt,
        "output": trace.get("completion_tokens"),
        "cached": trace.get("cached_tokens"),
    }
    return Waterfall(total_ms=total, bars=bars, missing=missing, tokens=tokens)
