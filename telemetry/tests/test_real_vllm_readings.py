"""What Tandem reads from a real vLLM (0.32.0, the CPU build), fed with what that engine produced.

``data/vllm-0.32.0/`` is written by ``python -m realengine.capture --out telemetry/tests/data/vllm-0.32.0``:
the engine's ``/metrics`` between fixed steps of traffic, its answers, its own log, and the connector
failure lines vLLM's own code writes (``realengine.connector_lines``). Nothing in it is written by hand.
"""

from __future__ import annotations

import re
from pathlib import Path

from telemetry.assemble import PodResult, PodTarget, build_snapshot, empty_state
from telemetry.derive import metrics, outcomes, pod_window
from telemetry.links import PairInput, engine_view, pair_link
from telemetry.logscan import for_pair, scan
from telemetry.parse import parse_metrics

DATA = Path(__file__).parent / "data" / "vllm-0.32.0"


def text(name: str) -> str:
    return (DATA / name).read_text()


def window(before: str, after: str):
    return pod_window(parse_metrics(text(after), ts=102.0), parse_metrics(text(before), ts=100.0))[0]


def one_pod_snapshot(before: str, after: str):
    """A topology of one aggregated real vLLM pod, collected at ``before`` and then at ``after``."""
    state = empty_state()
    state["pods"] = {"vllm-0": parse_metrics(text(before), ts=100.0)}
    target = PodTarget(name="vllm-0", role="both", ip="127.0.0.10", port=8000, ready=True, phase="Running")
    results = [PodResult(target=target, raw=parse_metrics(text(after), ts=102.0))]
    return build_snapshot(
        topology_id=1, ts=102.0, interval_s=2.0, results=results, state=state, slo_ttft_ms=None,
        slo_tbt_ms=None, open_alerts=set(), alert_intervals=3, link_slow_ms=250.0, events=[],
    )[0]  # fmt: skip


def test_a_real_vllm_refusing_only_the_clients_requests_is_not_down():
    """Real vLLM counts statuses by class; three 4xx answers (max_tokens over the context, an unknown
    model, a prompt over the context) are the clients' errors, not the engine failing. Most answers being
    4xx that could hide a 429 of the engine's is worth a look (degraded), with the reason in words."""
    snap = one_pod_snapshot("metrics-1-served.txt", "metrics-2-client-errors.txt")
    assert snap["health"]["state"] == "degraded", snap["health"]
    assert snap["totals"]["error_rate"] == 0.0
    assert snap["totals"]["client_error_rate"] == 1.0
    assert snap["totals"]["requests_ps"] == 1.5  # 3 answers in 2 s
    (note,) = snap["health"]["reasons"]
    assert "3 of 3 requests to the pods" in note and "refused as the client's" in note
    assert "the engine counts statuses by class, so a 429 of its own would be among them" in note


def test_requests_served_are_counted_on_every_api_the_engine_serves():
    """Anthropic Messages and the Responses API (each streamed and not) are counted like chat completions,
    and so are their client errors."""
    seen = outcomes(window("metrics-2-client-errors.txt", "metrics-3-other-apis.txt"))
    assert (seen.ok, seen.failed, seen.client) == (4.0, 0.0, 0.0)
    values = metrics(window("metrics-2-client-errors.txt", "metrics-3-other-apis.txt"))
    assert values["requests_ps"] == 2.0 and values["success_rate"] == 1.0
    refused = outcomes(window("metrics-3-other-apis.txt", "metrics-4-other-api-errors.txt"))
    assert (refused.ok, refused.failed, refused.client) == (0.0, 0.0, 2.0)


def test_served_requests_by_status_and_by_finished_reason_agree():
    seen = outcomes(window("metrics-0-rest.txt", "metrics-1-served.txt"))
    assert (seen.ok, seen.failed, seen.client) == (3.0, 0.0, 0.0)
    no_http = re.sub(r"(?m)^http_requests_total.*\n", "", text("metrics-1-served.txt"))
    rest = re.sub(r"(?m)^http_requests_total.*\n", "", text("metrics-0-rest.txt"))
    by_reason = pod_window(parse_metrics(no_http, ts=102.0), parse_metrics(rest, ts=100.0))[0]
    assert outcomes(by_reason).ok == 3.0  # finished_reason="length" (and "stop", "repetition") served


def test_finished_reason_error_is_a_failure_when_the_http_counters_are_missing():
    """vLLM's ``finished_reason="error"`` is its internal error (answered 500): a failure, not a success.
    The real exposition, without its HTTP counters and with two requests finished by an error."""
    rest = re.sub(r"(?m)^http_requests_total.*\n", "", text("metrics-0-rest.txt"))
    errored = re.sub(r'(finished_reason="error",model_name="[^"]+"\}) 0\.0', r"\1 2.0", rest)
    assert errored != rest
    seen = outcomes(pod_window(parse_metrics(errored, ts=102.0), parse_metrics(rest, ts=100.0))[0])
    assert (seen.ok, seen.failed, seen.classes) == (0.0, 2.0, {"error": 2.0})


def test_the_real_connector_failure_lines_are_findings():
    findings = scan("decode-0", text("connector-lines.log").splitlines(), {})
    kinds = [(f["kind"], f["request"], f["peer_address"]) for f in findings]
    assert kinds == [
        ("transfer_failed", "chatcmpl-tandem-probe-4c1d9e-0", "10.8.0.21"),  # NIXL, the probe's request
        ("link_failed", None, None),  # NIXL handshake: names no host
        ("transfer_failed", "cmpl-client-1", "10.8.0.22"),  # NIXL, a client's request
        ("transfer_failed", "chatcmpl-tandem-probe-77ab01-0", None),  # Mooncake pull, two requests
        ("transfer_failed", "cmpl-client-2", None),
    ]


def test_a_nixl_line_naming_its_prefill_host_belongs_to_that_pair():
    findings = scan("decode-0", text("connector-lines.log").splitlines(), {})
    mine, unattributed = for_pair(
        findings, prefill="prefill-1", decode="decode-0", prefill_ip="10.8.0.22", decode_ip="10.8.0.30",
        probe_requests=[],
    )  # fmt: skip
    assert [f["request"] for f in mine] == ["cmpl-client-1"]
    assert [f["request"] for f in unattributed] == [None, "cmpl-client-2"]  # handshake; Mooncake's client


def test_a_healthy_real_engines_own_log_has_no_findings():
    lines = text("engine.log").splitlines()
    assert len(lines) > 50
    assert scan("vllm-0", lines, {}) == []


def test_a_connector_family_the_engine_does_not_export_is_absent_not_zero():
    """vLLM 0.32's Mooncake connector exports no Prometheus metrics: the link says so, and is unknown."""
    link = pair_link(
        pair=PairInput(prefill="prefill-0", decode="decode-0", prefill_ip="10.0.0.1", decode_ip="10.0.0.2"),
        view=engine_view("vllm", "mooncake"),
        window=window("metrics-1-served.txt", "metrics-2-client-errors.txt"),
        probe=None,
        findings=[],
        links_of_decode=1,
        now=102.0,
        interval_s=2.0,
        metrics_ts=102.0,
    )
    details = [source["detail"] for source in link["sources"]]
    assert not any("0 transfers" in detail for detail in details), details
    assert details == ["decode-0 exports no vllm:mooncake_* family: its engine version's connector has none "
                       "(no evidence, not zero)"]  # fmt: skip
    assert link["state"] == "unknown"
    assert "exports no vllm:mooncake_* family" in link["blind"][0]


def test_prompt_tokens_by_source_are_read_and_short_prompts_on_decode_are_no_recompute():
    """The real engine's ``vllm:prompt_tokens_by_source_total`` and block size (128 on the CPU build):
    three short prompts (43 tokens) computed locally move no whole block, so a decode doing the same
    is not recomputing anything it should have received."""
    from telemetry.datapath import PodWindow, decode_recompute

    raw = parse_metrics(text("metrics-1-served.txt"), ts=102.0)
    assert raw["counters"]["prompt_local_compute"] == 43.0
    assert raw["counters"]["prompt_local_cache_hit"] == raw["counters"]["prompt_external_kv"] == 0.0
    assert raw["info"]["block_size"] == "128"
    served = window("metrics-0-rest.txt", "metrics-1-served.txt")
    assert served.deltas["prompt_local_compute"] == 43.0
    assert decode_recompute([PodWindow("decode-0", "decode", served, 128)], 2.0) is None
