"""Label selectors (equality and set-based) and field selectors, through the official client."""

from __future__ import annotations

import uuid

import pytest
from kubernetes.client.rest import ApiException


@pytest.fixture
def labelled(core):
    namespace = f"sel-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    for name, labels in {
        "p1": {"role": "prefill", "tier": "gold"},
        "p2": {"role": "prefill"},
        "d1": {"role": "decode", "tier": "silver"},
        "r1": {"role": "router"},
    }.items():
        core.create_namespaced_config_map(namespace, {"metadata": {"name": name, "labels": labels}})
    yield namespace
    core.delete_namespace(namespace)


def _names(core, namespace, **kwargs):
    return sorted(cm.metadata.name for cm in core.list_namespaced_config_map(namespace, **kwargs).items)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("role=prefill", ["p1", "p2"]),
        ("role==decode", ["d1"]),
        ("role!=prefill", ["d1", "r1"]),
        ("role in (decode,router)", ["d1", "r1"]),
        ("role notin (prefill)", ["d1", "r1"]),
        ("tier", ["d1", "p1"]),
        ("!tier", ["p2", "r1"]),
        ("role=prefill,tier=gold", ["p1"]),
        ("role in (prefill, decode),!tier", ["p2"]),
    ],
)
def test_label_selector_forms(core, labelled, selector, expected):
    assert _names(core, labelled, label_selector=selector) == expected


def test_malformed_label_selector_is_400(core, labelled):
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map(labelled, label_selector="role in prefill")
    assert exc.value.status == 400


def test_field_selector_on_name_and_namespace(core, labelled):
    assert _names(core, labelled, field_selector="metadata.name=d1") == ["d1"]
    assert _names(core, labelled, field_selector="metadata.name!=d1") == ["p1", "p2", "r1"]
    everywhere = core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={labelled}")
    assert len(everywhere.items) == 4


def test_unsupported_field_label_is_400(core, labelled):
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map(labelled, field_selector="data.k=v")
    assert exc.value.status == 400
    assert "field label not supported: data.k" in exc.value.body


def test_pod_field_selectors_on_phase_and_node(core, sandbox_cluster):
    namespace = f"fs-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        pod = {
            "metadata": {"name": "plain"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
        }
        core.create_namespaced_pod(namespace, pod)
        running = sandbox_cluster.wait_for(
            lambda: core.list_namespaced_pod(namespace, field_selector="status.phase=Running").items,
            message="the pod to run",
        )
        node = running[0].spec.node_name
        assert node
        on_node = core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node},metadata.namespace={namespace}"
        )
        assert [p.metadata.name for p in on_node.items] == ["plain"]
        assert core.list_namespaced_pod(namespace, field_selector="status.phase=Pending").items == []
    finally:
        core.delete_namespace(namespace)


def test_event_field_selectors_on_involved_object(core, sandbox_cluster):
    namespace = f"ev-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": "watched"},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
            },
        )
        uid = core.read_namespaced_pod("watched", namespace).metadata.uid
        events = sandbox_cluster.wait_for(
            lambda: (
                core.list_namespaced_event(
                    namespace,
                    field_selector=f"involvedObject.kind=Pod,involvedObject.name=watched,involvedObject.uid={uid}",
                ).items
            ),
            message="events about the pod",
        )
        assert {e.reason for e in events} >= {"Scheduled"}
        assert all(e.involved_object.name == "watched" for e in events)
        scheduled = core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
        assert [e.source.component for e in scheduled] == ["default-scheduler"]
    finally:
        core.delete_namespace(namespace)
