"""The metrics sources' pure parts: Prometheus answers parse to the same samples as a scrape, PromQL
selectors, and the named problem when a source fails."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kube.proxy import describe_proxy_failure
from telemetry.assemble import PodResult, PodTarget
from telemetry.collect import apply_source_problem, source_problem
from telemetry.parse import parse_metrics
from telemetry.snapshot import empty_snapshot
from telemetry.sources import (
    TARGET_LABELS,
    PrometheusSource,
    pod_selector,
    render_exposition,
    split_by_pod,
)
from telemetry.tests.exposition import mindie_text, sglang_text, vllm_text

SOURCE = PrometheusSource("http://prom.example:9090")
TARGET = PodTarget(name="p-0", role="decode", ip="10.0.0.5", port=8000, ready=True, phase="Running")


def as_prometheus_answer(text: str, pod: str) -> dict:
    """What Prometheus' /api/v1/query answers for the series a scrape of ``text`` stored."""
    result = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = {"__name__": sample.name, **sample.labels}
            labels.update({"job": "pods", "instance": "10.0.0.5:8000", "namespace": "ns", "pod": pod})
            result.append({"metric": labels, "value": [1.7e9, repr(float(sample.value))]})
    result.append({"metric": {"__name__": "up", "namespace": "ns", "pod": pod}, "value": [1.7e9, "1"]})
    return {"resultType": "vector", "result": result}


@pytest.mark.parametrize(
    "text", [vllm_text(), sglang_text(), mindie_text()], ids=["vllm", "sglang", "mindie"]
)
def test_prometheus_series_parse_to_the_same_sample_as_the_scrape(text):
    by_pod, up = split_by_pod(SOURCE, as_prometheus_answer(text, "p-0"))
    assert up == {"p-0": 1.0}
    rendered = render_exposition(by_pod["p-0"], TARGET_LABELS | {"namespace", "pod"})
    direct, through_prometheus = parse_metrics(text, ts=1.0), parse_metrics(rendered, ts=1.0)
    assert through_prometheus == direct
    assert direct["counters"] or direct["gauges"]


def test_pod_selector_matches_names_literally():
    selector = pod_selector(SOURCE, "prod", ["ds-0.decode-1", "ds-0-prefill-0"])
    assert selector == '{namespace="prod",pod=~"ds-0-prefill-0|ds-0\\\\.decode-1"}'


def test_a_pod_prometheus_failed_to_scrape_has_up_zero():
    answer = {"result": [{"metric": {"__name__": "up", "pod": "p-0"}, "value": [1, "0"]}]}
    assert split_by_pod(SOURCE, answer) == ({}, {"p-0": 0.0})


def test_proxy_403_names_the_rule_to_grant():
    body = (
        b'{"kind":"Status","message":"pods \\"p-0\\" is forbidden: '
        b'User \\"x\\" cannot get resource \\"pods/proxy\\""}'
    )
    text = describe_proxy_failure(403, body)
    assert text.startswith("403 from API server, grant get on pods/proxy")
    assert "resources: ['pods/proxy'], verbs: ['get']" in text and "is forbidden" in text


def test_a_source_that_answers_for_no_pod_is_one_named_problem():
    failed = [
        PodResult(target=TARGET, error="metrics source proxy: 403 from API server, grant get on pods/proxy"),
        PodResult(target=TARGET, error="metrics source proxy: 403 from API server, grant get on pods/proxy"),
    ]
    problem, tried = source_problem("proxy", failed)
    assert (
        tried
        and problem == "metrics source proxy: 403 from API server, grant get on pods/proxy (and 1 more pod)"
    )
    direct = [
        PodResult(target=TARGET, error="cannot connect to http://10.0.0.5:8000/metrics: Connection refused")
    ]
    assert source_problem("direct", direct)[0] == (
        "metrics source direct: cannot connect to http://10.0.0.5:8000/metrics: Connection refused"
    )


def test_one_readable_pod_means_the_source_works():
    results = [
        PodResult(target=TARGET, error="slow"),
        PodResult(target=TARGET, raw=parse_metrics(vllm_text(), ts=1)),
    ]
    assert source_problem("direct", results) == (None, True)
    assert source_problem("direct", [PodResult(target=TARGET, skipped=True)]) == (None, False)


def test_the_problem_comes_first_and_the_state_is_stale():
    snapshot = empty_snapshot(1, 1.0, 2.0, "p-0: metrics unavailable")
    apply_source_problem(snapshot, "Prometheus at http://p:9090 unreachable: Connection refused")
    assert snapshot["health"]["state"] == "stale"
    assert snapshot["health"]["reasons"][0] == "Prometheus at http://p:9090 unreachable: Connection refused"
