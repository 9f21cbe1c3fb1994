"""The API server's and controllers' pure logic, without a cluster."""

from __future__ import annotations

from collections import Counter

import pytest

from sandbox.apiserver import patch, protobuf, ssa
from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.logs import new_lines
from sandbox.apiserver.selectors import labels_match, parse_label_selector, selector_to_string
from sandbox.controllers.containers import image_is_broken, is_engine_container, service_for_host
from sandbox.controllers.routers import parse_duration, server_endpoints
from sandbox.controllers.scheduler import fit, unschedulable_message


def test_label_selector_parsing_keeps_commas_inside_sets():
    requirements = parse_label_selector("env in (a,b),tier notin (x), !legacy, app")
    assert [(r.key, r.op, r.values) for r in requirements] == [
        ("env", "in", ("a", "b")),
        ("tier", "notin", ("x",)),
        ("legacy", "!", ()),
        ("app", "exists", ()),
    ]
    assert labels_match(requirements, {"env": "a", "app": "x"})
    assert not labels_match(requirements, {"env": "a", "app": "x", "legacy": "1"})


def test_invalid_label_value_is_a_400():
    with pytest.raises(ApiError) as exc:
        parse_label_selector("app=has space")
    assert exc.value.code == 400


def test_selector_object_renders_like_a_scale_status():
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
    }
    assert selector_to_string(selector) == "app=web,tier in (a,b)"


def test_strategic_merge_handles_kubectl_directives():
    live = {
        "spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}],
            "finalizers": ["x", "y"],
        }
    }
    change = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b", "$patch": "delete"}, {"name": "c", "image": "2"}],
            "$deleteFromPrimitiveList/finalizers": ["x"],
        }
    }
    assert patch.strategic_merge_patch(live, change) == {
        "spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "c", "image": "2"}],
            "finalizers": ["y"],
        }
    }


def test_merge_patch_null_removes_keys():
    assert patch.merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None}}) == {"a": {"c": 2}}


def test_field_sets_track_labels_and_spec_leaves_and_round_trip():
    obj = {
        "apiVersion": "v1",
        "kind": "X",
        "metadata": {"name": "n", "labels": {"a": "1"}},
        "spec": {"r": 1, "l": [1, 2]},
    }
    fields = ssa.field_set(obj)
    assert fields == {("metadata", "labels", "a"), ("spec", "r"), ("spec", "l")}
    assert ssa.decode_fields(ssa.encode_fields(fields)) == fields


def test_apply_conflict_lists_every_foreign_field():
    live = ssa.apply(None, {"metadata": {"name": "n"}, "spec": {"a": 1, "b": 2}}, "one", "v1", force=False)
    with pytest.raises(ApiError) as exc:
        ssa.apply(live, {"metadata": {"name": "n"}, "spec": {"a": 9, "b": 8}}, "two", "v1", force=False)
    assert exc.value.code == 409
    assert exc.value.message.startswith("Apply failed with 2 conflicts:")
    assert [c["field"] for c in exc.value.details["causes"]] == [".spec.a", ".spec.b"]


def test_follow_finds_new_lines_after_the_log_dropped_old_ones():
    assert new_lines(["a", "b", "c"], ["a", "b", "c", "d"]) == ["d"]
    assert new_lines(["a", "b", "c"], ["b", "c", "d", "e"]) == ["d", "e"]
    assert new_lines([], ["x"]) == ["x"]


def _varint(value):
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_protobuf_configmap_body_decodes_to_json():
    meta = _field(1, b"cfg") + _field(11, _field(1, b"app") + _field(2, b"web"))
    data = _field(2, _field(1, b"k") + _field(2, b"v"))
    raw = _field(1, meta) + data
    type_meta = _field(1, b"v1") + _field(2, b"ConfigMap")
    body = protobuf.MAGIC + _field(1, type_meta) + _field(2, raw)
    assert protobuf.decode(body) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"app": "web"}},
        "data": {"k": "v"},
    }
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(protobuf.MAGIC + _field(1, _field(1, b"apps/v1") + _field(2, b"Deployment")))


def test_scheduler_reasons_and_message():
    assert fit({"huawei.com/Ascend910": 2.0}, {"huawei.com/ascend-1980": 8.0, "pods": 110.0}) == [
        "Insufficient huawei.com/Ascend910"
    ]
    message = unschedulable_message(4, Counter({"Insufficient huawei.com/Ascend910": 4}))
    assert message == (
        "0/4 nodes are available: 4 Insufficient huawei.com/Ascend910. preemption: 0/4 nodes are available: "
        "4 No preemption victims found for incoming pod."
    )


def test_engine_container_and_broken_image_rules():
    runtime = {"name": "runtime", "image": "ghcr.io/volcano-sh/runtime:latest", "args": ["--engine", "vllm"]}
    engine = {"name": "vllm", "image": "ghcr.io/volcano-sh/kthena-engine:vllm-ascend_v0.10.1rc1"}
    script = {"name": "p", "image": "quay.io/x/y:1", "command": ["/bin/bash"], "args": ["-c", "vllm serve m"]}
    assert not is_engine_container(runtime)
    assert is_engine_container(engine) and is_engine_container(script)
    assert image_is_broken("vllm/vllm-openai:v0.10.1-broken")
    assert not image_is_broken("registry:5000/vllm-broken/vllm:v1")


def test_mooncake_master_resolves_like_cluster_dns():
    services = [
        {"metadata": {"name": "mooncake-master", "namespace": "infra"}, "spec": {"clusterIP": "127.9.220.1"}}
    ]
    assert service_for_host("mooncake-master.infra.svc.cluster.local", "dev", services)
    assert service_for_host("mooncake-master.infra", "dev", services)
    assert service_for_host("127.9.220.1", "dev", services)
    assert service_for_host("mooncake-master", "dev", services) is None
    assert service_for_host("mooncake-master", "infra", services)


def test_model_server_endpoints_pair_by_group_key():
    server = {
        "spec": {
            "workloadPort": {"port": 8000},
            "workloadSelector": {
                "matchLabels": {"app": "ms"},
                "pdGroup": {
                    "groupKey": "group",
                    "prefillLabels": {"role": "prefill"},
                    "decodeLabels": {"role": "decode"},
                },
            },
        }
    }

    def pod(name, role, group, ready=True):
        conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
        labels = {"app": "ms", "role": role, "group": group}
        return {
            "metadata": {"name": name, "labels": labels},
            "status": {"podIP": f"127.0.0.{len(name)}", "conditions": conditions},
        }

    endpoints = server_endpoints(
        server,
        [pod("p0", "prefill", "g0"), pod("d0x", "decode", "g0", ready=False), pod("other", "router", "g0")],
    )
    assert [(e.pod_name, e.role, e.group, e.port, e.ready) for e in endpoints] == [
        ("p0", "prefill", "g0", 8000, True),
        ("d0x", "decode", "g0", 8000, False),
    ]
    assert parse_duration("1m30s", 0) == 90
    assert parse_duration("150ms", 0) == pytest.approx(0.15)
    assert parse_duration(None, 60) == 60
