"""End to end against the sandbox: real pods, real engines' /metrics and logs (pods/log), Tandem's link
probes, real link faults and real inference errors."""

from __future__ import annotations

import time
import uuid

import pytest
import requests
from django.conf import settings

import kube
from kube.labels import TOPOLOGY
from telemetry import services
from telemetry.models import Point, Series
from telemetry.testing import collect_intervals, deploy_ready, undeploy


@pytest.fixture
def deployed(sandbox_cluster, db, operator):
    """A P/D topology applied to the sandbox (prefill + decode Ready), marked deployed."""
    ready = deploy_ready(sandbox_cluster, operator, prefix="tel")
    yield ready.topology, ready.conn, ready.namespace
    undeploy(sandbox_cluster, ready.namespace)


def pods_by_role(conn, topology):
    out: dict[str, list[kube.PodInfo]] = {}
    for pod in kube.list_pods(conn, topology.namespace, f"{TOPOLOGY}={topology.pk}"):
        role = pod.labels.get("tandem.io/role") or pod.labels.get("modelserving.volcano.sh/role") or "both"
        out.setdefault(role, []).append(pod)
    return out


def base_url(pod):
    return f"http://{pod.ip}:{pod.container_ports[0] if pod.container_ports else 8000}"


def collect_until(topology, check, attempts):
    """Collect up to ``attempts`` times, an interval apart as beat does (a collection takes the link
    probes that ended since the one before); the snapshots, and whether ``check`` held for the last."""
    snapshots = []
    for attempt in range(attempts):
        if attempt:
            time.sleep(settings.TELEMETRY_INTERVAL_SECONDS)
        snapshot = services.telemetry_collect(topology_id=topology.pk)
        assert snapshot is not None
        snapshots.append(snapshot)
        if check(snapshot):
            return snapshots, True
    return snapshots, False


def link_of(snapshot, prefill, decode):
    return next(
        link
        for link in snapshot["links"]
        if link["prefill"] == prefill.name and link["decode"] == decode.name
    )


def test_collection_stores_points_and_a_link_fault_takes_that_link_down_with_pods_ready(deployed):
    """Links come from what real engines expose: Tandem's probe through the pair, the decode pod's
    connector metrics and the connector's log lines (read through pods/log); no /kv/links."""
    topology, conn, _ = deployed
    pods = pods_by_role(conn, topology)
    prefill, decode = pods["prefill"][0], pods["decode"][0]
    assert requests.get(f"{base_url(decode)}/kv/links", timeout=5).status_code == 404  # as on real engines

    _, second = collect_intervals(topology.pk, 2)
    names = {p["name"] for p in second["pods"]}
    assert {prefill.name, decode.name} <= names
    for pod in second["pods"]:
        assert pod["stale"] is False and pod["error"] is None, pod
        assert pod["engine"] == "vllm" and pod["waiting"] is not None and pod["kv_usage"] is not None
    prefill_row = next(p for p in second["pods"] if p["name"] == prefill.name)
    assert prefill_row["prompt_tps"] is not None
    link = link_of(second, prefill, decode)
    assert link["state"] == "up", link
    kinds = {source["kind"] for source in link["sources"]}
    assert {"probe", "metrics"} <= kinds, link["sources"]
    assert link["probe_ms"] is not None and link["observed_at"] is not None
    assert second["ts"] - link["observed_at"] < 2 * second["interval_s"]  # fresh
    assert link["transfers"] >= 1 and link["xfer_p95_ms"] is not None  # the probe's own KV pull
    assert link["xfer_mean_ms"] is not None and link["xfer_mean_ms"] <= link["probe_ms"]  # part of it
    assert second["health"]["state"] in ("healthy", "degraded"), second["health"]
    stored = Point.objects.filter(series__topology=topology).count()
    assert stored > 0 and Series.objects.filter(topology=topology, name=f"pod.{decode.name}.waiting").exists()

    fault = requests.post(
        f"{base_url(decode)}/sandbox/faults", json={"kind": "link_down", "peer": prefill.name}, timeout=5
    )
    assert fault.status_code in (200, 201), fault.text
    try:
        snapshots, red = collect_until(topology, lambda s: link_of(s, prefill, decode)["state"] == "down", 2)
    finally:
        requests.delete(f"{base_url(decode)}/sandbox/faults", timeout=5)
    link = link_of(snapshots[-1], prefill, decode)
    assert red, [link_of(s, prefill, decode) for s in snapshots]
    assert all(p["ready"] for p in snapshots[-1]["pods"] if p["name"] in (prefill.name, decode.name))
    # explained in words, from the connector's own log line about Tandem's probe request
    assert link["reason"] and prefill.name in link["reason"] and decode.name in link["reason"], link
    assert "Failed to transfer KV cache for request cmpl-tandem-probe-" in link["reason"], link
    assert any(s["kind"] == "log" for s in link["sources"]), link["sources"]
    assert link["reason"] in "; ".join(snapshots[-1]["health"]["reasons"])
    assert snapshots[-1]["health"]["state"] in ("degraded", "down")
    assert Point.objects.filter(series__name=f"link.{prefill.name}.{decode.name}.state", value=2.0).exists()


def test_a_pod_that_stops_answering_is_reported_without_delaying_the_others(deployed, settings):
    topology, conn, _ = deployed
    pods = pods_by_role(conn, topology)
    decode = pods["decode"][0]
    services.telemetry_collect(topology_id=topology.pk)
    slow = requests.post(
        f"{base_url(decode)}/sandbox/faults",
        json={"kind": "slow", "delay_ms": 5000, "target": "metrics"},
        timeout=5,
    )
    assert slow.status_code in (200, 201), slow.text
    try:
        started = time.monotonic()
        snapshot = services.telemetry_collect(topology_id=topology.pk)
        took = time.monotonic() - started
    finally:
        requests.delete(f"{base_url(decode)}/sandbox/faults", timeout=5)
    timeout = 0.8 * settings.TELEMETRY_INTERVAL_SECONDS
    assert took < timeout + 1.5  # bounded by the per-pod timeout, not by the slow pod's 5 s
    row = next(p for p in snapshot["pods"] if p["name"] == decode.name)
    assert row["stale"] is True and "no answer" in row["error"]
    others = [p for p in snapshot["pods"] if p["name"] != decode.name]
    assert others and all(p["stale"] is False for p in others)
    assert any(
        decode.name in reason and "metrics unavailable" in reason for reason in snapshot["health"]["reasons"]
    )


def router_url(conn, namespace):
    """The P/D router of the topology's ModelRoute (the sandbox writes its address on the route)."""
    route = kube.list_objects(conn, "networking.serving.volcano.sh/v1alpha1", "ModelRoute", namespace)[0]
    return route["metadata"]["annotations"]["sandbox.tandem.io/router-url"]


def send(url, model, count):
    """``count`` completions through the router, 8 at a time; their status codes."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i):
        body = {"model": model, "prompt": f"question {i} " * 20, "max_tokens": 4}
        return requests.post(f"{url}/v1/completions", json=body, timeout=30).status_code

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize(
    ("role", "fault", "answered", "words", "state"),
    [
        ("decode", {"kind": "http_5xx", "status": 503}, 502, "decode pods answered 5xx", "down"),
        # vLLM counts statuses by class: its 429s are among its 4xx, which are the clients' errors unless
        # told apart; the topology is not healthy, and the page says why it cannot tell
        ("prefill", {"kind": "http_429"}, 429, "a 429 of its own would be among them", "degraded"),
    ],
)
def test_a_topology_failing_its_requests_is_never_healthy(deployed, role, fault, answered, words, state):
    """Issue repro: a decode pod answering 503 (the router answers 502) or prefill pods answering 429.
    The error rate comes from where the errors are seen: the engines' http_requests_total{status}."""
    topology, conn, namespace = deployed
    pods = pods_by_role(conn, topology)
    url = router_url(conn, namespace)
    assert set(send(url, topology.model_name, 8)) == {200}
    services.telemetry_collect(topology_id=topology.pk)
    healthy = services.telemetry_collect(topology_id=topology.pk)
    assert healthy is not None and healthy["totals"]["error_rate"] in (0.0, None)
    for pod in pods[role]:
        requests.post(f"{base_url(pod)}/sandbox/faults", json=fault, timeout=5).raise_for_status()
    try:
        codes = send(url, topology.model_name, 40)
        failing = services.telemetry_collect(topology_id=topology.pk)
    finally:
        for pod in pods[role]:
            requests.delete(f"{base_url(pod)}/sandbox/faults", timeout=5)
    assert codes.count(answered) == 40, codes
    assert failing is not None
    totals = failing["totals"]
    failed = "error_rate" if state == "down" else "client_error_rate"
    assert totals[failed] is not None and totals[failed] > 0.9, totals
    assert totals["success_rate"] is not None and totals["success_rate"] < 0.1, totals
    assert failing["health"]["state"] == state, failing["health"]
    assert any(words in reason for reason in failing["health"]["reasons"]), failing["health"]
    role_rates = failing["roles"][role]
    assert role_rates[failed] is not None and role_rates[failed] > 0.9


def test_a_slow_link_turns_amber_from_its_own_transfer_time_within_two_intervals(deployed):
    topology, conn, _ = deployed
    pods = pods_by_role(conn, topology)
    prefill, decode = pods["prefill"][0], pods["decode"][0]
    services.telemetry_collect(topology_id=topology.pk)
    fault = {"kind": "link_slow", "peer": prefill.name, "delay_ms": 600}
    requests.post(f"{base_url(decode)}/sandbox/faults", json=fault, timeout=5).raise_for_status()
    try:
        snapshots, amber = collect_until(
            topology, lambda s: link_of(s, prefill, decode)["state"] == "degraded", 2
        )
    finally:
        requests.delete(f"{base_url(decode)}/sandbox/faults", timeout=5)
    link = link_of(snapshots[-1], prefill, decode)
    assert amber, [link_of(s, prefill, decode) for s in snapshots]
    assert link["xfer_p95_ms"] > 250 and link["xfer_mean_ms"] >= 600, link  # the probe's own slow pull
    assert link["reason"].startswith(f"KV transfers into {decode.name} are slow: p95"), link
    assert link["reason"] in snapshots[-1]["health"]["reasons"]


def test_the_metrics_never_wait_for_a_slow_probe_whose_result_comes_with_the_next_interval(
    deployed, settings
):
    """A probe is a real request through the pair: on a busy engine it takes hundreds of milliseconds.
    The pods' figures go out without it; the probe's answer is taken by the next collection."""
    topology, conn, _ = deployed
    pods = pods_by_role(conn, topology)
    prefill, decode = pods["prefill"][0], pods["decode"][0]
    collect_intervals(topology.pk, 2)
    delay_ms = 1200  # under the probe's timeout (0.8 of the 2 s interval)
    fault = {"kind": "link_slow", "peer": prefill.name, "delay_ms": delay_ms}
    requests.post(f"{base_url(decode)}/sandbox/faults", json=fault, timeout=5).raise_for_status()
    try:
        started = time.monotonic()
        first = services.telemetry_collect(topology_id=topology.pk)
        took = time.monotonic() - started
        time.sleep(settings.TELEMETRY_INTERVAL_SECONDS)
        second = services.telemetry_collect(topology_id=topology.pk)
    finally:
        requests.delete(f"{base_url(decode)}/sandbox/faults", timeout=5)
    assert first is not None and second is not None
    assert took < delay_ms / 1000, took  # the slow probe was under way when the snapshot went out
    assert all(p["stale"] is False for p in first["pods"]), first["pods"]
    probe_before = link_of(first, prefill, decode)["probe_ms"]
    assert probe_before is not None and probe_before < delay_ms  # the interval before's probe
    slow = link_of(second, prefill, decode)
    assert slow["probe_ms"] is not None and slow["probe_ms"] >= delay_ms, slow
    assert second["ts"] - slow["observed_at"] < 2 * second["interval_s"], slow  # and it is fresh


def send_long(url, model, count):
    """``count`` completions whose prompts no cache holds (about 300 tokens each); their status codes."""

    def one(i):
        body = {"model": model, "prompt": f"{uuid.uuid4().hex} item {i} " * 100, "max_tokens": 2}
        return requests.post(f"{url}/v1/completions", json=body, timeout=30).status_code

    return [one(i) for i in range(count)]


def test_a_decode_silently_recomputing_is_named_within_two_intervals_and_fails_the_pd_check(deployed):
    """Issue repro: the decode's connector delivers nothing, every request still succeeds; the decode's
    own prompt-token counters by source show it prefilling the prompts itself."""
    from gateway.pdcheck import judge_pd

    topology, conn, namespace = deployed
    pods = pods_by_role(conn, topology)
    url = router_url(conn, namespace)
    services.telemetry_collect(topology_id=topology.pk)
    assert set(send_long(url, topology.model_name, 3)) == {200}
    clean = services.telemetry_collect(topology_id=topology.pk)
    assert clean is not None and "problems" not in clean["health"], clean["health"]
    for pod in pods["decode"]:
        fault = {"kind": "kv_not_delivered"}
        requests.post(f"{base_url(pod)}/sandbox/faults", json=fault, timeout=5).raise_for_status()
    try:
        assert set(send_long(url, topology.model_name, 4)) == {200}  # nothing fails: that is the point
        snapshots, named = collect_until(
            topology,
            lambda s: any(p["key"] == "decode_recompute" for p in s["health"].get("problems", [])),
            2,
        )
    finally:
        for pod in pods["decode"]:
            requests.delete(f"{base_url(pod)}/sandbox/faults", timeout=5)
    assert named, [s["health"] for s in snapshots]
    health = snapshots[-1]["health"]
    assert health["state"] == "degraded"
    reason = next(r for r in health["reasons"] if r.startswith("silent prefill recompute: decode recomputed"))
    assert "prefill work and TTFT" in reason and "kv_transfer_config" in reason
    passed, summary, diagnosis = judge_pd(dict(snapshots[-1]), time.time())
    assert not passed and "silent prefill recompute" in summary, (summary, diagnosis)
    # the fault cleared: the next interval's traffic travels again and the problem is gone
    assert set(send_long(url, topology.model_name, 3)) == {200}
    cleared = services.telemetry_collect(topology_id=topology.pk)
    assert cleared is not None
    assert not any(p["key"] == "decode_recompute" for p in cleared["health"].get("problems", [])), cleared
    assert judge_pd(dict(cleared), time.time())[0] is True
