"""Verification probes: prove, in one click, that requests work and that KV-cache reuse happens.

Each probe returns a result with ``passed``, a one-line summary, its figures, and on failure a
diagnosis in words. The judgements (``judge_*``) are pure functions; the runners drive the gateway's
dispatch in-process (:mod:`gateway.inprocess`).
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from gateway import inprocess
from gateway.routes import RouteEntry

KINDS = ("smoke", "prefix", "concurrency", "links", "fallback", "pd")
DEFAULTS: dict[str, Any] = {
    "prefix_words": 1500,
    "prefix_requests": 5,
    "prefix_margin": 0.3,
    "concurrency_clients": 10,
    "concurrency_seconds": 10.0,
}
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]


@dataclass
class ProbeResult:
    name: str
    passed: bool
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    diagnosis: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 1)


def explain_failure(answer: inprocess.Answer) -> list[str]:
    """What an operator should check, from how a request failed."""
    code, status = answer.error_code, answer.status
    if code == "cluster_unavailable":
        return [
            answer.error,
            "Check that the router pods are Ready and the serving endpoint is reachable from Tandem.",
        ]
    if code == "all_backends_down":
        return [answer.error]
    if code == "fallback_rejected_key":
        return [answer.error]
    if status == 400:
        return [
            f"The engine refused the request: {answer.error or 'no reason given'}.",
            "A prompt longer than the model's context is refused: lower prefix_words for the prefix probe.",
        ]
    if status == 404:
        return [
            "The cluster does not know the model name; check the topology's served model name and aliases."
        ]
    if status in (502, 503, 504):
        return [
            f"The cluster answered {status}: {answer.error or 'no body'}.",
            "Look at the Deployments panel and the KV links: a broken link or a crashed decode pod "
            "gives 5xx.",
        ]
    if status == 200 and not answer.text:
        return [
            "The answer has no choices[0].message.content: the engine returned an error body or an empty "
            'completion (the "reading choices" error clients report).'
        ]
    return [answer.error or f"status {status}"]


async def smoke(entry: RouteEntry) -> ProbeResult:
    answer = await inprocess.chat(
        entry, [{"role": "user", "content": "Reply with one short sentence."}], max_tokens=16
    )
    figures = {
        "status": answer.status,
        "backend": answer.backend,
        "latency_ms": round(answer.latency_ms, 1),
        "completion_tokens": answer.completion_tokens,
        "prompt_tokens": answer.prompt_tokens,
    }
    ok = answer.status == 200 and bool(answer.text) and answer.completion_tokens > 0
    if ok:
        return ProbeResult(
            "smoke",
            True,
            f"200 from the {answer.backend} in {answer.latency_ms:.0f} ms, {answer.completion_tokens} tokens",
            figures,
        )
    diagnosis = explain_failure(answer)
    if answer.status == 200 and answer.text and not answer.completion_tokens:
        diagnosis = ["The answer carries no usage; token quotas cannot be counted for this engine."]
    return ProbeResult(
        "smoke", False, f"the request failed ({answer.status or 'no answer'})", figures, diagnosis
    )


def judge_prefix(
    ttfts: list[float | None],
    *,
    margin: float,
    hit_before: float | None,
    hit_after: float | None,
    control: float | None = None,
) -> tuple[bool, str, list[str]]:
    """Pass when the warm requests' median TTFT is at least `margin` below the cold one.

    Cold is the prefix's first request or, when it is faster, a control request with a fresh prefix
    of the same length sent after the warm ones: a slow first request alone (a new connection, a load
    swing) is not taken for reuse."""
    if len(ttfts) < 2 or any(t is None for t in ttfts):
        return False, "not every request returned a first token", ["See the smoke probe first."]
    first = float(ttfts[0])  # type: ignore[arg-type]
    cold = min(first, control) if control is not None else first
    later = statistics.median(float(t) for t in ttfts[1:])  # type: ignore[arg-type]
    drop = 1 - later / cold if cold > 0 else 0.0
    text = f"TTFT {cold:.0f} ms cold, {later:.0f} ms warm median ({drop:.0%} lower; needs {margin:.0%})"
    if drop >= margin:
        return True, text, []
    causes = [
        "KV-cache reuse is not happening for requests that share a prefix. Likely causes:",
        "prefix caching is disabled on the engines (vLLM --no-enable-prefix-caching, "
        "SGLang --disable-radix-cache);",
        "the KV connector is misconfigured, so decode re-computes instead of pulling the cached blocks;",
        "KV links are down (see the KV links panel);",
        "the router is not prefix-aware and spreads requests with the same prefix over prefill instances.",
    ]
    if hit_before is not None and hit_after is not None and hit_after <= hit_before:
        causes.insert(
            1, f"the engines' prefix-cache hit rate did not rise ({hit_before:.0%} → {hit_after:.0%});"
        )
    return False, text, causes


def _hit_rate(topology_id: int) -> float | None:
    from telemetry.selectors import latest_snapshot

    snapshot = latest_snapshot(topology_id=topology_id)
    totals = snapshot.get("totals") if snapshot is not None else None
    if isinstance(totals, dict):
        value = totals.get("hit_rate")
        return float(value) if value is not None else None
    return None


async def prefix(entry: RouteEntry, params: dict[str, Any]) -> ProbeResult:
    from asgiref.sync import sync_to_async

    words = int(params["prefix_words"])
    salt = secrets.token_hex(4)  # a prefix no earlier run cached
    shared = " ".join(f"{WORDS[i % len(WORDS)]}-{salt}" for i in range(words))
    hit_before = await sync_to_async(_hit_rate)(entry.topology_id)
    # A short request first, so connections are open before anything is timed.
    await inprocess.chat(entry, [{"role": "user", "content": "warm-up"}], max_tokens=1, stream=True)
    ttfts: list[float | None] = []
    for n in range(int(params["prefix_requests"])):
        answer = await inprocess.chat(
            entry,
            [{"role": "user", "content": f"{shared}\n\nQuestion {n}: summarise."}],
            max_tokens=4,
            stream=True,
        )
        if answer.status != 200:
            return ProbeResult(
                "prefix",
                False,
                f"request {n + 1} failed ({answer.status})",
                {"ttft_ms": ttfts},
                explain_failure(answer),
            )
        ttfts.append(round(answer.ttft_ms, 1) if answer.ttft_ms is not None else None)
    fresh = " ".join(f"{WORDS[(i + 7) % len(WORDS)]}-{secrets.token_hex(4)}" for i in range(words))
    control = await inprocess.chat(
        entry, [{"role": "user", "content": f"{fresh}\n\nQuestion 0: summarise."}], max_tokens=4, stream=True
    )
    control_ttft = (
        round(control.ttft_ms, 1) if control.status == 200 and control.ttft_ms is not None else None
    )
    hit_after = await sync_to_async(_hit_rate)(entry.topology_id)
    ok, text, diagnosis = judge_prefix(
        ttfts,
        margin=float(params["prefix_margin"]),
        hit_before=hit_before,
        hit_after=hit_after,
        control=control_ttft,
    )
    figures = {
        "ttft_ms": ttfts,
        "control_ttft_ms": control_ttft,
        "prefix_words": words,
        "hit_rate_before": hit_before,
        "hit_rate_after": hit_after,
    }
    return ProbeResult("prefix", ok, text, figures, diagnosis)


async def concurrency(entry: RouteEntry, params: dict[str, Any]) -> ProbeResult:
    clients = int(params["concurrency_clients"])
    seconds = float(params["concurrency_seconds"])
    deadline = time.monotonic() + seconds
    ttfts: list[float] = []
    latencies: list[float] = []
    errors: dict[str, int] = {}
    tokens = 0

    async def one_client(index: int) -> None:
        nonlocal tokens
        n = 0
        while time.monotonic() < deadline:
            answer = await inprocess.chat(
                entry,
                [{"role": "user", "content": f"Client {index} request {n}: say something."}],
                max_tokens=16,
                stream=True,
            )
            n += 1
            if answer.status != 200:
                key = str(answer.status or answer.error_code or "no answer")
                errors[key] = errors.get(key, 0) + 1
                continue
            latencies.append(answer.latency_ms)
            if answer.ttft_ms is not None:
                ttfts.append(answer.ttft_ms)
            tokens += answer.completion_tokens

    started = time.monotonic()
    await asyncio.gather(*(one_client(i) for i in range(clients)))
    elapsed = time.monotonic() - started
    done = len(latencies)
    failed = sum(errors.values())
    figures = {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": done + failed,
        "errors": errors,
        "requests_per_s": round(done / elapsed, 2) if elapsed else None,
        "output_tokens_per_s": round(tokens / elapsed, 1) if elapsed else None,
        "ttft_p50_ms": percentile(ttfts, 0.5),
        "ttft_p95_ms": percentile(ttfts, 0.95),
        "latency_p50_ms": percentile(latencies, 0.5),
        "latency_p95_ms": percentile(latencies, 0.95),
    }
    ok = done > 0 and failed == 0
    summary = (
        f"{clients} clients: {figures['requests_per_s']} req/s, TTFT p95 {figures['ttft_p95_ms']} ms, "
        f"{failed} errors"
    )
    diagnosis = (
        []
        if ok
        else [
            f"{failed} of {done + failed} requests failed: {errors}",
            "Errors under load but not alone point at capacity: queue depth, KV-cache usage.",
        ]
    )
    return ProbeResult("concurrency", ok, summary, figures, diagnosis)


STALE_INTERVALS = 3  # a link state older than this many collection intervals is not evidence


def judge_links(snapshot: dict[str, Any] | None, now: float) -> ProbeResult:
    """Every prefill→decode link as the telemetry sees it (pure): passes only when every link is up
    and was seen within ``STALE_INTERVALS`` collection intervals (an old "up" proves nothing now)."""
    found = list(snapshot.get("links") or []) if snapshot is not None else []
    if snapshot is None or not found:
        return ProbeResult(
            "links",
            False,
            "no KV links are known for this topology",
            {},
            ["Telemetry has not seen the topology's links yet: is it deployed and collected?"],
        )
    interval = float(snapshot.get("interval_s") or 2.0)
    age = now - float(snapshot.get("ts") or 0.0)
    rows = [dict(link) for link in found]
    if age > STALE_INTERVALS * interval:
        return ProbeResult(
            "links",
            False,
            f"the link states are {age:.0f} s old",
            {"links": rows, "age_s": round(age, 1)},
            [
                f"Telemetry last collected this topology {age:.0f} s ago (every {interval:g} s expected): "
                "check that the Celery worker and beat run, and the topology's health on its page."
            ],
        )
    bad = []
    for row in rows:
        seen = row.get("observed_at")
        if str(row.get("state", "")) != "up":
            code = row.get("status_code") or ""
            bad.append(
                f"{row.get('prefill')} → {row.get('decode')}: {row.get('state')} {code} "
                f"{row.get('reason') or ''}".strip()
            )
        elif seen is None or now - float(seen) > STALE_INTERVALS * interval:
            when = "never" if seen is None else f"{now - float(seen):.0f} s ago"
            bad.append(
                f"{row.get('prefill')} → {row.get('decode')}: up, but last seen {when}: nothing that can "
                "see the link (probe, connector metrics, log lines) said so since"
            )
    summary = f"{len(rows) - len(bad)} of {len(rows)} KV links healthy"
    return ProbeResult("links", not bad, summary, {"links": rows}, bad)


async def links(entry: RouteEntry) -> ProbeResult:
    """Every prefill→decode link as the telemetry sees it now (state, freshness, where it comes from)."""
    from asgiref.sync import sync_to_async

    from telemetry.selectors import latest_snapshot

    snapshot = await sync_to_async(latest_snapshot)(topology_id=entry.topology_id)
    return judge_links(dict(snapshot) if snapshot is not None else None, time.time())


async def fallback_compare(entry: RouteEntry) -> ProbeResult:
    if entry.fallback is None:
        return ProbeResult(
            "fallback",
            False,
            "this topology has no fallback upstream",
            {},
            ["Configure a fallback on the topology's gateway settings to compare."],
        )
    messages = [{"role": "user", "content": "In one sentence: what is prefill/decode disaggregation?"}]
    cluster = await inprocess.chat(entry, messages, max_tokens=32, backend="cluster")
    fallback = await inprocess.chat(entry, messages, max_tokens=32, backend="fallback")
    figures = {
        "cluster": {
            "status": cluster.status,
            "latency_ms": round(cluster.latency_ms, 1),
            "text": cluster.text[:500],
        },
        "fallback": {
            "status": fallback.status,
            "latency_ms": round(fallback.latency_ms, 1),
            "text": fallback.text[:500],
        },
    }
    ok = cluster.status == 200 and fallback.status == 200
    diagnosis = []
    if cluster.status != 200:
        diagnosis += ["cluster: " + d for d in explain_failure(cluster)]
    if fallback.status != 200:
        diagnosis += ["fallback: " + d for d in explain_failure(fallback)]
    summary = (
        f"cluster {cluster.status} in {cluster.latency_ms:.0f} ms, fallback {fallback.status} in "
        f"{fallback.latency_ms:.0f} ms"
    )
    return ProbeResult("fallback", ok, summary, figures, diagnosis)


async def run(entry: RouteEntry, kinds: list[str], params: dict[str, Any]) -> list[ProbeResult]:
    """The probes of a run, one after another, on an event loop of their own (a worker's
    ``asyncio.run``): their requests are written, and the loop's HTTP session and recorder closed and
    dropped, before it returns, so runs leave nothing behind in the worker."""
    from gateway import recorder, upstream

    try:
        return await _run(entry, kinds, {**DEFAULTS, **params})
    finally:
        await recorder.flush_and_forget()
        await upstream.close_session()


async def _run(entry: RouteEntry, kinds: list[str], settings: dict[str, Any]) -> list[ProbeResult]:
    results = []
    for kind in kinds:
        if kind == "smoke":
            results.append(await smoke(entry))
        elif kind == "prefix":
            results.append(await prefix(entry, settings))
        elif kind == "concurrency":
            results.append(await concurrency(entry, settings))
        elif kind == "links":
            results.append(await links(entry))
        elif kind == "fallback":
            results.append(await fallback_compare(entry))
        elif kind == "pd":
            from gateway.pdcheck import pd

            results.append(ProbeResult("pd", *await pd(entry)))
    return results
