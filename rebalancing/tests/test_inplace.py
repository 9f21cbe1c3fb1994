"""Which engines switch in place, what Tandem reads from MindIE's status and refusals, and how an in-place
override moves the split the planner and ratio changes work from."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rebalancing import selectors
from rebalancing.inplace import (
    Instance,
    ascend_devices,
    assignment,
    busy_count,
    devices_problem,
    engine_refusal,
    instance_id,
    sglang_busy,
    sglang_live_role,
    status_problem,
)
from rebalancing.models import RoleOverride
from rebalancing.switching import switch_path

PREFILL = Instance("demo-0-prefill-0-0", "10.0.0.2", "prefill", "prefill")
DECODE = Instance("demo-0-decode-0-0", "10.0.0.3", "decode", "decode")


@pytest.mark.parametrize(
    ("engine", "connector", "backend", "path"),
    [
        ("mindie", "llm-datadist", "kthena", "in_place"),
        ("mindie", "llm-datadist", "deployments", "restart"),
        ("vllm", "nixl", "kthena", "restart"),
        ("vllm-ascend", "llm-datadist", "kthena", "restart"),
        ("sglang", "mooncake", "kthena", "in_place"),
        ("sglang", "nixl", "kthena", "restart"),
        ("sglang", "mooncake", "deployments", "restart"),
    ],
)
def test_mindie_and_sglang_with_mooncake_on_kthena_switch_in_place(engine, connector, backend, path):
    chosen = switch_path(engine, connector, backend)
    assert chosen.name == path and chosen.reason


def test_the_assignment_lists_the_instance_and_its_peers_as_mindie_reads_them():
    annotations = {
        "ascend.kubectl.kubernetes.io/ascend-910-configuration": json.dumps(
            {
                "pod_name": DECODE.name,
                "server_id": "192.0.2.7",
                "devices": [
                    {"device_id": "4", "device_ip": "29.1.7.4"},
                    {"device_id": "5", "device_ip": "29.1.7.5"},
                ],
            }
        )
    }
    decode = replace(DECODE, devices=ascend_devices(annotations))
    prefill = replace(PREFILL, devices=(("0", "29.1.2.0"),))
    body = assignment(decode, [prefill])
    assert body["local"] == {
        "id": instance_id(DECODE.name),
        "server_ip": "10.0.0.3",
        "host_ip": "10.0.0.3",
        "device": [
            {"device_id": "4", "device_ip": "29.1.7.4", "device_logical_id": "0"},
            {"device_id": "5", "device_ip": "29.1.7.5", "device_logical_id": "1"},
        ],
    }
    assert [(p["server_ip"], p["device"][0]["device_ip"]) for p in body["peers"]] == [
        ("10.0.0.2", "29.1.2.0")
    ]
    assert instance_id(DECODE.name) == instance_id(DECODE.name) != instance_id(PREFILL.name)


def test_npu_devices_come_from_the_device_plugins_annotation_and_their_absence_is_named():
    key = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
    newer_key = "ascend.kubectl.kubernetes.io/ascend-npu-configuration"
    newer = {newer_key: '{"devices": [{"device_id": "1", "device_ip": "a"}]}'}
    assert ascend_devices(newer) == (("1", "a"),)
    for broken in ({}, {key: "{not json"}, {key: '{"devices": [{"device_id": "1"}]}'}):
        assert ascend_devices(broken) == ()
    problem = devices_problem([replace(PREFILL, devices=(("0", "a"),)), DECODE])
    assert DECODE.name in problem and PREFILL.name not in problem
    assert "Ascend device plugin" in problem and "ascend-910-configuration" in problem
    assert devices_problem([replace(DECODE, devices=(("0", "a"),))]) == ""


def _status(role_status="RoleReady", role="decode", links=None):
    return {
        "service": {"roleStatus": role_status, "currentRole": role},
        "resource": {"runningRequestNum": 2, "waitingRequestNum": 1},
        "linkStatus": {"peers": links or []},
    }


def test_status_says_what_is_not_ready_yet():
    linked = [{"target": instance_id(PREFILL.name), "link": "ok"}]
    assert status_problem(_status(links=linked), "decode", [PREFILL]) == ""
    assert "RoleSwitching" in status_problem(_status("RoleSwitching"), "decode", [])
    assert "serves 'prefill'" in status_problem(_status(role="prefill"), "decode", [])
    down = [{"target": instance_id(PREFILL.name), "link": "failed : LLM_LINK_FAILED"}]
    assert "LLM_LINK_FAILED" in status_problem(_status(links=down), "decode", [PREFILL])
    assert "not linked" in status_problem(_status(), "decode", [PREFILL])
    assert status_problem("nonsense", "decode", []) != ""
    assert busy_count(_status()) == 3 and busy_count({}) is None


def test_a_refusal_keeps_the_engines_code_and_names_the_open_links():
    code, message = engine_refusal(
        503, {"error": "switch_role refused", "ret": "LLM_EXIST_LINK", "links": ["demo-0-decode-0-0"]}
    )
    assert code == "LLM_EXIST_LINK" and "demo-0-decode-0-0" in message
    assert engine_refusal(422, {"error": "bad body", "error_type": "Input validation error"}) == (
        "http_422",
        "bad body",
    )
    assert engine_refusal(502, None) == ("http_502", "HTTP 502")


def test_overrides_move_the_effective_split_and_ratio_changes_scale_the_spec(make_topology, operator):
    from rebalancing.services import rebalance_ratio_start

    topology = make_topology(budget=4, replicas=(1, 2))
    RoleOverride.objects.create(
        topology=topology, pod="t-0-decode-1-0", template_role="decode", serving_role="prefill"
    )
    assert selectors.role_replicas(topology.spec) == (1, 2)
    assert selectors.effective_replicas(topology) == (2, 1)
    assert (selectors.observation(topology).prefill, selectors.observation(topology).decode) == (2, 1)
    # 3P/1D served is the spec at 2P/2D with one decode serving prefill: one move, prefill → 2
    rebalance = rebalance_ratio_start(topology=topology, prefill=3, decode=1, actor=operator, source_ip=None)
    assert (rebalance.from_prefill, rebalance.from_decode) == (2, 1)
    assert rebalance.moves == [{"role": "prefill", "replicas": 2}]


def test_an_override_outlives_an_unready_pod_but_not_a_gone_replaced_or_restarted_one(make_topology):
    from rebalancing.services.overrides import overrides_prune

    topology = make_topology(budget=6, replicas=(2, 3))
    for pod in ("t-0-decode-0-0", "t-0-decode-1-0", "t-0-decode-2-0", "t-0-prefill-1-0"):
        template = "prefill" if "prefill" in pod else "decode"
        RoleOverride.objects.create(
            topology=topology,
            pod=pod,
            template_role=template,
            serving_role="decode" if template == "prefill" else "prefill",
            restarts=1,
        )
    present = {
        # unready (no address yet), still labelled as switched, no new restart: keeps serving prefill
        "t-0-decode-0-0": Instance("t-0-decode-0-0", "", "prefill", "decode", restarts=1),
        # replaced: a new pod of the same name, in its template's role
        "t-0-decode-1-0": Instance("t-0-decode-1-0", "10.0.0.5", "decode", "decode"),
        # its engine restarted since the switch: back in its template's role, label still switched
        "t-0-decode-2-0": Instance("t-0-decode-2-0", "10.0.0.6", "prefill", "decode", restarts=2),
    }  # t-0-prefill-1-0 is gone
    restarted = overrides_prune(topology=topology, instances=present)
    assert [o.pod for o in restarted] == ["t-0-decode-2-0"]
    left = sorted(RoleOverride.objects.filter(topology=topology).values_list("pod", flat=True))
    assert left == ["t-0-decode-0-0", "t-0-decode-2-0"]  # the caller relabels and ends the restarted one


def test_the_panel_shows_the_served_split_and_what_serves_out_of_its_template_role(make_topology, operator):
    from django.test import Client

    topology = make_topology(budget=4, replicas=(1, 2))
    RoleOverride.objects.create(
        topology=topology, pod="t-0-decode-1-0", template_role="decode", serving_role="prefill"
    )
    client = Client()
    client.force_login(operator)
    panel = client.get(f"/rebalancing/topology/{topology.pk}/panel/").content.decode()
    assert "2P / 1D" in panel
    assert "t-0-decode-1-0 serves prefill, its template decode" in panel
    assert "a replaced pod comes back in its template's role" in panel


def test_sglang_busy_and_live_role_come_from_its_metrics_and_server_info():
    text = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{engine_type="decode"} 2.0\n'
        "# TYPE sglang:num_queue_reqs gauge\n"
        'sglang:num_queue_reqs{engine_type="decode"} 1.0\n'
    )
    assert sglang_busy(text) == 3
    assert sglang_busy("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1.0\n") is None
    info = {"disaggregation_mode": "prefill", "internal_states": [{"disaggregation_mode": "decode"}]}
    assert sglang_live_role(info) == "decode"
    assert sglang_live_role({"internal_states": []}) is None


def test_a_worker_whose_run_was_taken_over_stops_at_its_next_heartbeat(make_topology):
    """Two workers must never drive one switch: once another worker took over a run whose heartbeat
    went stale, the first one's next heartbeat fails (ClaimLost) instead of renewing the claim."""
    from datetime import timedelta

    from django.utils import timezone

    from rebalancing.models import Rebalance, RebalanceKind, RebalanceState
    from rebalancing.services.engine_steps import ClaimLost, beat
    from rebalancing.services.inplace import _claim

    topology = make_topology()
    created = Rebalance.objects.create(
        topology=topology, kind=RebalanceKind.SWITCH_IN_PLACE, state=RebalanceState.RUNNING,
        from_prefill=1, from_decode=1, target_prefill=2, target_decode=0, moves=[],
        params={"instance": "d-0", "source_role": "decode", "target_role": "prefill"},
    )  # fmt: skip
    first = Rebalance.objects.get(pk=created.pk)
    assert _claim(first) == "fresh"
    beat(first)  # its own claim: renewed
    assert _claim(Rebalance.objects.get(pk=created.pk)) == ""  # not stale: nobody else takes it

    Rebalance.objects.filter(pk=created.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    second = Rebalance.objects.get(pk=created.pk)
    assert _claim(second) == "orphan"  # the first worker looked dead
    with pytest.raises(ClaimLost):
        beat(first)  # ... but it was only slow: it stops here instead of driving the switch on
    beat(second)
    assert Rebalance.objects.get(pk=created.pk).heartbeat == second.heartbeat
