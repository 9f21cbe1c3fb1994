"""What a what-if replays: the gateway's per-request records when there are enough of them (arrivals,
lengths and prefix groups as recorded), else the per-minute telemetry; an imported trace when the run was
started with one; always within the work bounds. The source and its request count are stored."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from gateway.models import GatewayRequest
from perfmodel.sim import run_trace
from perfmodel.sim.evaluate import trace_from_rows
from whatif import services, simulation, tracereplay
from whatif.models import WhatIfRun, WhatIfState
from workload.tracefile import TraceRequest, export_jsonl


def _gateway(topology, count: int, *, every: float = 2.0, groups: int = 3, status: int = 200) -> None:
    now = time.time()
    GatewayRequest.objects.bulk_create(
        GatewayRequest(
            created=datetime.fromtimestamp(now - 200 + every * i, tz=UTC),
            model="m",
            topology=topology,
            endpoint="chat",
            backend="kthena",
            status=status,
            prompt_tokens=300 + i,
            completion_tokens=10 + i % 5,
            latency_ms=50.0,
            prefix_group=f"{i % groups:016x}",
        )
        for i in range(count)
    )


def _run(topology, operator, **kw) -> WhatIfRun:
    run = services.whatif_run_create(
        topology=topology, user=operator, window_seconds=600, splits=[(1, 1)], **kw
    )
    services.whatif_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, (run.state, run.error)
    return run


@pytest.mark.django_db
def test_enough_gateway_records_are_replayed_as_recorded(make_topology, record, operator):
    topology = make_topology(budget=2)
    record(topology, minutes=2, rate=0.5)  # the engines counted ~60 requests; the gateway saw 40
    _gateway(topology, 40)
    _gateway(topology, 5, status=429)  # refused by the gateway: never reached an engine
    run = _run(topology, operator)
    result = run.result
    assert (result["traffic_source"], result["recorded_requests"], result["requests"]) == ("gateway", 40, 40)
    assert "40 requests replayed as recorded (all 40 in the gateway's per-request records" in result["note"]
    assert "3 prefix groups" in result["note"]


@pytest.mark.django_db
def test_too_few_records_fall_back_to_the_per_minute_means(make_topology, record, operator):
    topology = make_topology(budget=2)
    record(topology, minutes=2, rate=0.5)
    _gateway(topology, tracereplay.MIN_TRACE_REQUESTS - 1)
    run = _run(topology, operator)
    assert run.result["traffic_source"] == "rollups" and run.result["recorded_requests"] == 60
    assert "Poisson arrivals at each minute's mean rate" in run.result["note"]


@pytest.mark.django_db
def test_records_covering_too_little_of_the_counted_traffic_fall_back_too(make_topology, record, operator):
    topology = make_topology(budget=2)
    record(topology, minutes=2, rate=1.0)  # 120 counted, 40 recorded: the gateway saw a third
    _gateway(topology, 40)
    assert _run(topology, operator).result["traffic_source"] == "rollups"


def test_a_trace_keeps_arrivals_lengths_and_prefix_groups():
    found = [
        TraceRequest(1000, 500, 20, "aa"),
        TraceRequest(1500, 700, 30, "bb"),
        TraceRequest(4000, 900, 9999, "aa"),
        TraceRequest(4200, 100, 5, ""),
    ]
    rows = tracereplay.rows(found)
    assert rows == [
        [0.0, 500, 20, 0],
        [0.5, 700, 30, 1],
        [3.0, 900, simulation.MAX_OUTPUT_LEN, 0],
        [3.2, 100, 5, -1],
    ]
    requests = trace_from_rows(rows, 1.0, tracereplay.SHARED_PREFIX_TOKENS)
    assert [(r.at, r.prompt_len, r.prefix, r.prefix_len) for r in requests] == [
        (0.0, 500, 0, 500),
        (0.5, 700, 1, 512),
        (3.0, 900, 0, 512),
        (3.2, 100, -1, 0),
    ]
    assert [r.at for r in trace_from_rows(rows, 2.0)] == [0.0, 0.25, 1.5, 1.6]  # twice the rate


def test_requests_of_one_prefix_group_hit_the_simulators_prefix_cache():
    shared = [[i * 0.5, 1024, 4, 0] for i in range(10)]
    distinct = [[i * 0.5, 1024, 4, i] for i in range(10)]

    def hits(rows):
        cluster = run_trace(trace_from_rows(rows, 1.0, tracereplay.SHARED_PREFIX_TOKENS), 1, 1)
        return sum(i.engine.stats.prefix_hits for i in cluster.instances.values() if i.role == "prefill")

    assert hits(distinct) == 0
    assert hits(shared) == 9 * tracereplay.SHARED_PREFIX_TOKENS  # every request after the first


def test_a_trace_is_kept_within_the_work_bounds():
    many = [[i * 0.01, 4000, 4000, -1] for i in range(5000)]
    kept = tracereplay.trim(many, splits=4)
    cost = sum(simulation.request_seconds(p, o) for _, p, o, _ in kept) * 4 * tracereplay.RUNS_PER_SPLIT
    assert 0 < len(kept) < 5000 and cost <= simulation.WORK_BUDGET_SECONDS
    assert kept[0][0] == 0.0 and kept[-1][1:] == many[-1][1:]  # the latest requests, re-based
    light = [[i * 0.01, 10, 1, -1] for i in range(5000)]
    assert len(tracereplay.trim(light, splits=1, budget_seconds=100.0)) == simulation.MAX_REQUESTS


TRACE = export_jsonl([TraceRequest(i * 400, 256, 8, f"g{i % 2}") for i in range(30)], {"source": "test"})


@pytest.fixture
def as_operator(api_client, operator):
    api_client.force_authenticate(operator)
    return api_client


@pytest.mark.django_db
def test_a_what_if_replays_an_imported_trace(make_topology, as_operator, operator):
    topology = make_topology(budget=2)
    answer = as_operator.post(
        f"/api/v1/topologies/{topology.pk}/what-if-runs/",
        {"trace": TRACE, "trace_name": "agent.jsonl", "splits": [[1, 1]]},
        format="json",
    )
    assert answer.status_code == 202, answer.json()
    assert answer.json()["imported_trace"] == {"file_format": "tandem", "name": "agent.jsonl", "total": 30}
    services.whatif_run_execute(run_id=answer.json()["id"])
    run = WhatIfRun.objects.get(pk=answer.json()["id"])
    assert run.state == WhatIfState.SUCCEEDED, run.error
    assert (run.result["traffic_source"], run.result["recorded_requests"], run.result["requests"]) == (
        "imported",
        30,
        30,
    )
    read = as_operator.get(f"/api/v1/what-if-runs/{run.pk}/").json()
    assert read["result"]["traffic_source"] == "imported" and read["result"]["recorded_requests"] == 30


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"trace": '{"format": "tandem-trace", "version": 1}\n{"arrival_ms": "x"}\n'}, "trace", "line 2"),
        ({"trace": "hello"}, "trace", "format"),
        ({"trace": "TIMESTAMP,ContextTokens,GeneratedTokens\n"}, "trace", "no request"),
        ({"trace": TRACE, "trace_format": "csv"}, "trace_format", "not a valid choice"),
        ({"trace_format": "azure"}, "trace_format", "give the trace too"),
        ({"trace": 5}, "trace", ""),
        ({"trace": TRACE, "trace_format": "azure"}, "trace", "header"),
    ],
)
def test_a_bad_imported_trace_is_a_field_error(make_topology, as_operator, body, field, says):
    topology = make_topology(budget=2)
    answer = as_operator.post(f"/api/v1/topologies/{topology.pk}/what-if-runs/", body, format="json")
    assert answer.status_code == 400, answer.json()
    fields = answer.json()["error"]["fields"]
    assert field in fields and says in " ".join(fields[field]), fields
    assert not WhatIfRun.objects.exists()
