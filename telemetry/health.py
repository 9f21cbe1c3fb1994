"""Topology health in words, and SLO evaluation with hysteresis (PURE)."""

from __future__ import annotations

from typing import Literal, TypedDict

from telemetry.datapath import Problem, problem_reason
from telemetry.derive import HTTP_CLIENT, HTTP_FAILURES, Outcomes, TopologyOutcomes
from telemetry.snapshot import Health, HealthState, LinkSample, PodSample, Slo, SloState

SloMetric = Literal["ttft", "tbt"]
SLO_LABELS: dict[str, str] = {"ttft": "TTFT", "tbt": "TBT (inter-token latency)"}


class SloTrack(TypedDict):
    """Consecutive intervals an SLO was violated / met; kept between collections."""

    violated: int
    ok: int


def slo_metric_state(observed_ms: float | None, target_ms: float | None) -> SloState:
    if target_ms is None or observed_ms is None:
        return "unknown"
    return "violated" if observed_ms > target_ms else "ok"


def evaluate_slo(
    *, ttft_p95_s: float | None, tbt_p95_s: float | None, ttft_ms: float | None, tbt_ms: float | None
) -> tuple[Slo, dict[SloMetric, SloState]]:
    """Compare the observed p95s with the targets; overall state is violated if either is."""
    ttft_obs = ttft_p95_s * 1000 if ttft_p95_s is not None else None
    tbt_obs = tbt_p95_s * 1000 if tbt_p95_s is not None else None
    states: dict[SloMetric, SloState] = {
        "ttft": slo_metric_state(ttft_obs, ttft_ms),
        "tbt": slo_metric_state(tbt_obs, tbt_ms),
    }
    values = set(states.values())
    overall: SloState = "violated" if "violated" in values else ("ok" if "ok" in values else "unknown")
    return Slo(
        ttft_ms=ttft_ms, tbt_ms=tbt_ms, ttft_p95_ms=ttft_obs, tbt_p95_ms=tbt_obs, state=overall
    ), states


def slo_step(
    track: SloTrack | None, state: SloState, *, alert_open: bool, intervals: int
) -> tuple[SloTrack, Literal["raise", "resolve"] | None]:
    """Advance the streaks by one interval; raise after ``intervals`` violated intervals in a row,
    resolve after ``intervals`` met intervals in a row. Intervals without data change nothing."""
    current = SloTrack(violated=0, ok=0) if track is None else SloTrack(**track)
    if state == "violated":
        current = SloTrack(violated=current["violated"] + 1, ok=0)
    elif state == "ok":
        current = SloTrack(violated=0, ok=current["ok"] + 1)
    if state == "violated" and not alert_open and current["violated"] >= intervals:
        return current, "raise"
    if state == "ok" and alert_open and current["ok"] >= intervals:
        return current, "resolve"
    return current, None


def slo_reason(metric: SloMetric, observed_ms: float | None, target_ms: float | None) -> str:
    return f"{SLO_LABELS[metric]} p95 {observed_ms or 0:.0f} ms is above the {target_ms or 0:.0f} ms target"


def pod_reason(pod: PodSample, detail: str | None, restarts: int) -> str | None:
    """Why a pod needs attention, or None."""
    if not pod["ready"]:
        why = [part for part in (detail, f"{restarts} restarts" if restarts else None) if part]
        suffix = f" ({', '.join(why)})" if why else ""
        return f"{pod['name']} ({pod['role']}) is not Ready{suffix}"
    if pod["error"]:
        return f"{pod['name']}: metrics unavailable — {pod['error']}"
    return None


ERROR_RATE_DEGRADED = 0.01  # more than 1 % of the requests failing in an interval needs attention
ERROR_RATE_DOWN = 0.9  # 90 % or more failing: the topology is not serving
CLIENT_ERRORS_NOTED = 0.5  # client errors are noted (never a failure) when they are most of the answers
CLASS_WORDS = {
    "429": "429 (rate limited)",
    "5xx": "5xx",
    "other": "other errors",
    "aborted": "aborted",
    "error": "engine errors",
    "4xx": "4xx",
    "4xx_class": "4xx",
}


def _answered_by(roles: dict[str, Outcomes], classes: tuple[str, ...]) -> str:
    parts = []
    for role, seen in sorted(roles.items()):
        counted = sorted((c, n) for c, n in seen.classes.items() if c in classes)
        if not counted:
            continue
        answered = ", ".join(f"{CLASS_WORDS.get(c, c)} ×{n:.0f}" for c, n in counted)
        who = "the router" if role == "router" else f"{role} pods"
        parts.append(f"{who} answered {answered}")
    return f" ({'; '.join(parts)})" if parts else ""


def _what(seen: TopologyOutcomes) -> str:
    return "requests" if "router" in seen.roles else "requests to the pods (retries included)"


def request_error_reason(seen: TopologyOutcomes | None, interval_s: float) -> str | None:
    """``"77 of 120 requests failed in the last 2 s (decode pods answered 5xx ×77)"``, or None. Only the
    engine's failures count: an answer refused as the client's (4xx) is the engine working."""
    if seen is None:
        return None
    total = seen.answered
    if seen.failed <= 0 or total <= 0 or seen.failed / total <= ERROR_RATE_DEGRADED:
        return None
    detail = _answered_by(seen.roles, (*HTTP_FAILURES, "aborted", "error"))
    return f"{seen.failed:.0f} of {total:.0f} {_what(seen)} failed in the last {interval_s:g} s{detail}"


def _mostly_client_errors(seen: TopologyOutcomes | None) -> bool:
    return seen is not None and seen.answered > 0 and seen.client / seen.answered >= CLIENT_ERRORS_NOTED


def client_errors_grouped(seen: TopologyOutcomes | None) -> bool:
    """Most answers were 4xx counted by class only (real vLLM): a 429 of the engine's would hide there."""
    if seen is None or not _mostly_client_errors(seen):
        return False
    return any(value.grouped for value in seen.roles.values())


def client_error_note(seen: TopologyOutcomes | None, interval_s: float) -> str | None:
    """When most answers were the client's errors: said, never counted as the engine failing."""
    if seen is None or not _mostly_client_errors(seen):
        return None
    detail = _answered_by(seen.roles, HTTP_CLIENT)
    grouped = client_errors_grouped(seen)
    tail = (
        "; the engine counts statuses by class, so a 429 of its own would be among them: if the clients are "
        "not at fault, look at its queue and KV-cache usage"
        if grouped
        else ""
    )
    return (
        f"{seen.client:.0f} of {seen.answered:.0f} {_what(seen)} in the last {interval_s:g} s were refused "
        f"as the client's{detail}: the engines are serving; check what the clients send (a prompt longer "
        f"than the model's context, an unknown model name, a bad parameter){tail}"
    )


def topology_health(
    *,
    pods: list[PodSample],
    links: list[LinkSample],
    slo: Slo,
    pod_reasons: list[str],
    extra: list[str],
    requests: TopologyOutcomes | None = None,
    interval_s: float = 0.0,
    problems: list[Problem] | None = None,
) -> Health:
    """The topology's state and the reasons, most severe first. A topology failing its requests is
    never healthy: above 1 % failed it is degraded, and when nothing succeeded it is down."""
    if not pods:
        return Health(state="unknown", reasons=["no pods found for this topology yet", *extra])
    error_reason = request_error_reason(requests, interval_s)
    down_links = [link["reason"] or "" for link in links if link["state"] == "down"]
    slow_links = [link["reason"] or "" for link in links if link["state"] == "degraded"]
    slo_reasons = []
    if slo["state"] == "violated":
        if slo["ttft_ms"] is not None and (slo["ttft_p95_ms"] or 0) > slo["ttft_ms"]:
            slo_reasons.append(slo_reason("ttft", slo["ttft_p95_ms"], slo["ttft_ms"]))
        if slo["tbt_ms"] is not None and (slo["tbt_p95_ms"] or 0) > slo["tbt_ms"]:
            slo_reasons.append(slo_reason("tbt", slo["tbt_p95_ms"], slo["tbt_ms"]))
    silent = [problem_reason(p) for p in problems or []]
    reasons = [*([error_reason] if error_reason else []), *down_links, *silent, *pod_reasons, *slow_links]
    reasons += [*slo_reasons, *extra]

    serving = [pod for pod in pods if pod["role"] in ("prefill", "decode", "both")]
    roles = {pod["role"] for pod in serving}
    state: HealthState = "healthy"
    if reasons:
        state = "degraded"
    no_ready_role = [
        role for role in sorted(roles) if not any(p["ready"] for p in serving if p["role"] == role)
    ]
    if serving and no_ready_role:
        state = "down"
        reasons.insert(0, f"no {' or '.join(no_ready_role)} pod is Ready: requests cannot be served")
    elif requests is not None and 0 < requests.failed >= ERROR_RATE_DOWN * requests.answered:
        state = "down"
        reasons.insert(0, "nearly every request failed: the topology is not serving")
    elif links and all(link["state"] == "down" for link in links):
        state = "down"
        reasons.insert(0, "every KV link is down: decode pods cannot receive KV from prefill")
    note = client_error_note(requests, interval_s)
    if note is not None:
        reasons.append(note)
        if state == "healthy" and client_errors_grouped(requests):
            state = "degraded"  # most answers were 4xx that may hide the engine's 429s: needs a look
    health = Health(state=state, reasons=reasons)
    if problems:
        health["problems"] = [dict(p) for p in problems]
    return health


GATEWAY_MIN_REQUESTS = 5  # fewer requests through the gateway say too little to judge by


def gateway_reason(*, requests: int, cluster_failed: int, fallback: int, window_s: float) -> str | None:
    """What the gateway's own records say about the cluster: ``"gateway: 9 of 10 requests ... failed"``."""
    if (
        requests < GATEWAY_MIN_REQUESTS
        or cluster_failed <= 0
        or cluster_failed / requests <= ERROR_RATE_DEGRADED
    ):
        return None
    served = f"; the fallback served {fallback}" if fallback else ""
    return (
        f"gateway: {cluster_failed} of {requests} requests to the cluster failed in the last "
        f"{window_s:g} s{served}"
    )


def apply_gateway_outcomes(
    health: Health, *, requests: int, cluster_failed: int, fallback: int, window_s: float
) -> Health:
    """A topology whose requests through the gateway fail is never healthy; nearly all failing is down."""
    reason = gateway_reason(
        requests=requests, cluster_failed=cluster_failed, fallback=fallback, window_s=window_s
    )
    if reason is None:
        return health
    state: HealthState = health["state"]
    if cluster_failed >= ERROR_RATE_DOWN * requests:
        state = "down"
    elif state in ("healthy", "unknown"):
        state = "degraded"
    updated = Health(state=state, reasons=[reason, *[r for r in health["reasons"] if r != reason]])
    if "problems" in health:
        updated["problems"] = health["problems"]
    return updated
