"""Error rates from where errors are seen: HTTP status counters of the engines and the router (pure)."""

from __future__ import annotations

import pytest

from telemetry.assemble import PodResult, PodTarget, build_snapshot, empty_state
from telemetry.derive import metrics, outcomes, pod_window, topology_outcomes
from telemetry.health import request_error_reason, topology_health
from telemetry.parse import parse_metrics
from telemetry.snapshot import PodSample, Slo, empty_metrics
from telemetry.tests.exposition import vllm_text

NO_SLO = Slo(ttft_ms=None, tbt_ms=None, ttft_p95_ms=None, tbt_p95_ms=None, state="unknown")


def pod_sample(name: str, role: str) -> PodSample:
    return PodSample(
        **empty_metrics(), name=name, role=role, ip="127.0.0.9", ready=True, phase="Running", engine="vllm",
        stale=False, error=None, restarted=False,
    )  # fmt: skip


def http(**by_status: float) -> str:
    """vLLM's API-server counter (prometheus-fastapi-instrumentator), statuses grouped by class."""
    lines = ["# HELP http_requests_total Total number of requests by method, status and handler.",
             "# TYPE http_requests_total counter",
             'http_requests_total{handler="/metrics",method="GET",status="2xx"} 999.0']  # fmt: skip
    for status, value in by_status.items():
        code = status.removeprefix("s")
        lines.append(
            f'http_requests_total{{handler="/v1/completions",method="POST",status="{code}"}} {value}'
        )
    return "\n".join(lines) + "\n"


def router(**by_code: float) -> str:
    lines = ["# TYPE kthena_router_requests_total counter"]
    for code, value in by_code.items():
        labels = (
            f'model="m",path="/v1/completions",status_code="{code.removeprefix("s")}",error_type="",'
            'model_route="r",backend_type="model_server",backend_name="r",upstream_model="m"'
        )
        lines.append(f"kthena_router_requests_total{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def window(before: str, after: str):
    return pod_window(parse_metrics(after, ts=102.0), parse_metrics(before, ts=100.0))[0]


def test_http_status_counters_are_read_for_inference_handlers_only():
    raw = parse_metrics(vllm_text() + http(s2xx=10, s5xx=3, s4xx=1), ts=1.0)
    assert raw["counters"]["http_2xx"] == 10 and raw["counters"]["http_5xx"] == 3
    assert raw["counters"]["http_4xx_class"] == 1  # the /metrics handler's 999 is not a request outcome
    exact = parse_metrics(http(s503=2, s429=1), ts=1.0)["counters"]
    assert exact == {"http_5xx": 2.0, "http_429": 1.0}  # exact codes when the exporter keeps them


def test_answers_the_engine_core_never_saw_are_failures():
    """A 503 from the API server is in http_requests_total, never in vllm:request_success_total."""
    w = window(vllm_text() + http(s2xx=10), vllm_text() + http(s2xx=10, s5xx=7))
    seen = outcomes(w)
    assert (seen.ok, seen.failed, seen.client, seen.classes) == (0.0, 7.0, 0.0, {"5xx": 7.0})
    values = metrics(w)
    assert (values["success_rate"], values["error_rate"]) == (0.0, 1.0)


def test_a_labelled_series_that_appears_counts_from_zero():
    w = window(vllm_text() + http(s2xx=10), vllm_text() + http(s2xx=12, s4xx=3))
    assert w.deltas["http_4xx_class"] == 3.0  # first seen now: its whole value happened in this interval


def test_topology_failures_are_every_roles_and_its_answers_decodes():
    prefill = window(http(s2xx=0), http(s2xx=20, s429=30))  # prefill pods answering 429
    decode = window(http(s2xx=0), http(s2xx=20))
    seen = topology_outcomes({"prefill": prefill, "decode": decode})
    assert (seen.ok, seen.failed, seen.client) == (20.0, 30.0, 0.0)
    assert {role: value.classes for role, value in seen.roles.items()} == {
        "prefill": {"429": 30.0},
        "decode": {},
    }
    reason = request_error_reason(seen, 2.0)
    assert reason == (
        "30 of 50 requests to the pods (retries included) failed in the last 2 s "
        "(prefill pods answered 429 (rate limited) ×30)"
    )


def test_the_routers_counters_are_what_clients_saw_and_win():
    r = window(router(s200=0), router(s200=43, s502=77))
    decode = window(http(s2xx=0), http(s2xx=43, s5xx=300))  # retries inflate the engines' counts
    seen = topology_outcomes({"router": r, "decode": decode})
    assert (seen.ok, seen.failed, list(seen.roles), seen.roles["router"].classes) == (
        43.0, 77.0, ["router"], {"5xx": 77.0},
    )  # fmt: skip
    assert request_error_reason(seen, 2.0) == (
        "77 of 120 requests failed in the last 2 s (the router answered 5xx ×77)"
    )


def test_no_counters_means_no_rates_not_success():
    w = window("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n",
               "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 2\n")  # fmt: skip
    assert outcomes(w) is None and metrics(w)["success_rate"] is None


def pods(decode_after: str, prefill_after: str = "") -> list[PodResult]:
    def target(name, role, ip):
        return PodTarget(name=name, role=role, ip=ip, port=8000, ready=True, phase="Running")

    prefill_raw = parse_metrics(prefill_after or http(s2xx=5), ts=102.0)
    decode_raw = parse_metrics(decode_after, ts=102.0)
    return [
        PodResult(target=target("prefill-0", "prefill", "127.0.0.10"), raw=prefill_raw),
        PodResult(target=target("decode-0", "decode", "127.0.0.11"), raw=decode_raw),
    ]


def snapshot(results):
    state = empty_state()
    state["pods"] = {
        "prefill-0": parse_metrics(http(s2xx=5), ts=100.0),
        "decode-0": parse_metrics(http(s2xx=5), ts=100.0),
    }
    return build_snapshot(
        topology_id=1, ts=102.0, interval_s=2.0, results=results, state=state, slo_ttft_ms=None,
        slo_tbt_ms=None, open_alerts=set(), alert_intervals=3, link_slow_ms=250.0, events=[],
    )[0]  # fmt: skip


@pytest.mark.parametrize(
    ("decode", "prefill", "state"),
    [
        (http(s2xx=5 + 43, s5xx=77), "", "degraded"),  # issue repro: 77 of 120 failed
        (http(s2xx=5, s5xx=120), "", "down"),  # nothing served
        (http(s2xx=5 + 10), http(s2xx=5 + 10, s429=110), "down"),  # 429 on prefill: 110 of 120
        (http(s2xx=5 + 100), "", "healthy"),
    ],
)
def test_a_topology_failing_its_requests_is_never_healthy(decode, prefill, state):
    snap = snapshot(pods(decode, prefill))
    assert snap["health"]["state"] == state, snap["health"]
    if state != "healthy":
        assert any("failed in the last 2 s" in reason for reason in snap["health"]["reasons"])
        assert snap["totals"]["error_rate"] is not None and snap["totals"]["error_rate"] > 0.5


def test_the_gateways_records_make_a_failing_topology_unhealthy():
    from telemetry.health import apply_gateway_outcomes, gateway_reason

    healthy = {"state": "healthy", "reasons": []}
    assert gateway_reason(requests=3, cluster_failed=3, fallback=3, window_s=60) is None  # too few to judge
    assert apply_gateway_outcomes(healthy, requests=100, cluster_failed=1, fallback=0, window_s=60) == healthy
    degraded = apply_gateway_outcomes(healthy, requests=100, cluster_failed=30, fallback=30, window_s=60)
    assert degraded["state"] == "degraded"
    assert degraded["reasons"][0] == (
        "gateway: 30 of 100 requests to the cluster failed in the last 60 s; the fallback served 30"
    )
    down = apply_gateway_outcomes(healthy, requests=50, cluster_failed=50, fallback=0, window_s=60)
    assert down["state"] == "down"


def test_collection_counts_the_gateways_records(db, admin_user):
    from django.utils import timezone

    from gateway.models import GatewayRequest
    from gateway.selectors import recent_outcomes
    from telemetry.tests.conftest import _make_topology_for_gateway as make

    topology = make(admin_user)
    now = timezone.now()
    rows = [
        ("cluster", 200, ""),
        ("fallback", 200, ""),
        ("cluster", 502, ""),
        ("none", 503, "cluster_unavailable"),
    ]
    for backend, status, code in rows:
        GatewayRequest.objects.create(
            created=now,
            model="m",
            topology=topology,
            endpoint="chat/completions",
            backend=backend,
            status=status,
            error_code=code,
            latency_ms=1.0,
        )
    assert recent_outcomes(topology_id=topology.pk, since=now - timezone.timedelta(minutes=1)) == (4, 3, 1)


def test_client_errors_the_engine_names_exactly_leave_the_topology_healthy_and_are_said():
    """A router that counts exact codes: 400s are the clients' own; a 429 would be named apart."""
    r = window(router(s200=0), router(s200=10, s400=30))
    seen = topology_outcomes({"router": r})
    assert (seen.ok, seen.failed, seen.client) == (10.0, 0.0, 30.0)
    assert request_error_reason(seen, 2.0) is None
    snap_health = topology_health(
        pods=[pod_sample("router-0", "router"), pod_sample("decode-0", "decode")],
        links=[], slo=NO_SLO, pod_reasons=[], extra=[], requests=seen, interval_s=2.0,
    )  # fmt: skip
    assert snap_health["state"] == "healthy"
    (note,) = snap_health["reasons"]
    assert note.startswith(
        "30 of 40 requests in the last 2 s were refused as the client's (the router answered 4xx ×30)"
    )
    assert "429" not in note
