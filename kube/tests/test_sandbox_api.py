"""kube/ against the sandbox cluster over real HTTP: apply, read, scale, delete, errors."""

from __future__ import annotations

import itertools
import json

import pytest

import kube
from kube import KubeConflict, KubeInvalid, KubeNotInstalled, KubeUnauthorized
from kube.labels import MANAGED_BY, MANAGED_BY_VALUE

_ids = itertools.count(7000)
OWNED = {MANAGED_BY: MANAGED_BY_VALUE}


def _conn(sandbox, token=None) -> kube.ClusterConnection:
    return kube.ClusterConnection(
        cluster_id=next(_ids),
        server=sandbox.server,
        token=token or sandbox.token,
        credential_version="t",
        cluster_name="sandbox",
    )


def _namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": OWNED}}


def _configmap(ns: str, name: str, data: dict, labels=None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels or OWNED},
        "data": data,
    }


def test_server_side_apply_is_idempotent_and_managed_by_tandem(sandbox_cluster):
    conn = _conn(sandbox_cluster)
    objects = [_configmap("ssa", "settings", {"a": "1"}), _namespace("ssa")]
    first = kube.apply_objects(conn, objects)
    assert [o["kind"] for o in first] == ["Namespace", "ConfigMap"]  # dependency order
    second = kube.apply_objects(conn, objects)
    assert [o["metadata"]["resourceVersion"] for o in second] == [
        o["metadata"]["resourceVersion"] for o in first
    ]
    live = kube.get_object(conn, "v1", "ConfigMap", "ssa", "settings")
    assert live is not None
    assert {m["manager"] for m in live["metadata"]["managedFields"]} == {"tandem"}
    assert {m["operation"] for m in live["metadata"]["managedFields"]} == {"Apply"}


def test_custom_objects_apply_through_discovery(sandbox_cluster):
    conn = _conn(sandbox_cluster)
    kube.apply_objects(conn, [_namespace("crd")])
    route = {
        "apiVersion": "networking.serving.volcano.sh/v1alpha1",
        "kind": "ModelRoute",
        "metadata": {"name": "r1", "namespace": "crd", "labels": {**OWNED, "tandem.io/topology": "9"}},
        "spec": {
            "modelName": "m",
            "rules": [{"name": "default", "targetModels": [{"modelServerName": "s"}]}],
        },
    }
    kube.apply_objects(conn, [route])
    found = kube.list_objects(
        conn, "networking.serving.volcano.sh/v1alpha1", "ModelRoute", "crd", "tandem.io/topology=9"
    )
    assert [o["metadata"]["name"] for o in found] == ["r1"]
    assert (
        kube.list_objects(
            conn, "networking.serving.volcano.sh/v1alpha1", "ModelRoute", "crd", "tandem.io/topology=10"
        )
        == []
    )
    assert (
        kube.delete_object(conn, "networking.serving.volcano.sh/v1alpha1", "ModelRoute", "crd", "r1") is True
    )
    assert (
        kube.delete_object(conn, "networking.serving.volcano.sh/v1alpha1", "ModelRoute", "crd", "r1") is False
    )


def test_invalid_object_is_refused_with_its_fields(sandbox_cluster):
    conn = _conn(sandbox_cluster)
    kube.apply_objects(conn, [_namespace("bad")])
    serving = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "broken", "namespace": "bad", "labels": OWNED},
        "spec": {"replicas": "two"},
    }
    with pytest.raises(KubeInvalid) as err:
        kube.apply_objects(conn, [serving])
    assert err.value.status == 422
    assert "cluster `sandbox` refused apply ModelServing bad/broken" in err.value.message
    assert any(field == "spec.replicas" for field, _ in err.value.causes)


def test_conflicts_are_forced_only_on_objects_tandem_owns(sandbox_cluster):
    conn = _conn(sandbox_cluster)
    kube.apply_objects(conn, [_namespace("own")])
    for name in ("theirs", "ours"):
        body = _configmap("own", name, {"k": "other"}, labels={"team": "x"})
        kube.request(
            conn,
            "PATCH",
            f"/api/v1/namespaces/own/configmaps/{name}",
            query={"fieldManager": "someone-else"},
            body=json.dumps(body),
            content_type="application/apply-patch+yaml",
        )
    with pytest.raises(KubeConflict, match="someone-else"):
        kube.apply_objects(conn, [_configmap("own", "theirs", {"k": "tandem"}, labels={"team": "x"})])
    applied = kube.apply_objects(conn, [_configmap("own", "ours", {"k": "tandem"})])
    assert applied[0]["data"]["k"] == "tandem"


def test_scale_sets_replicas_through_the_subresource(sandbox_cluster):
    conn = _conn(sandbox_cluster)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "scale", "labels": OWNED},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    kube.apply_objects(conn, [_namespace("scale"), deployment])
    kube.scale(conn, "apps/v1", "Deployment", "scale", "web", 3)
    assert kube.get_object(conn, "apps/v1", "Deployment", "scale", "web")["spec"]["replicas"] == 3


def test_missing_object_is_none_and_missing_kind_is_not_installed(sandbox_cluster, sandbox_cluster_no_kthena):
    assert kube.get_object(_conn(sandbox_cluster), "v1", "ConfigMap", "default", "nope") is None
    with pytest.raises(KubeNotInstalled, match="install Kthena"):
        kube.get_object(
            _conn(sandbox_cluster_no_kthena),
            "workload.serving.volcano.sh/v1alpha1",
            "ModelServing",
            "default",
            "x",
        )


def test_wrong_token_is_unauthorized(sandbox_cluster):
    with pytest.raises(KubeUnauthorized, match="rejected the credentials"):
        kube.access_review(_conn(sandbox_cluster, token="not-the-token"), [("list", "", "pods", None)])


def test_nodes_report_accelerators_and_what_pods_use(sandbox_cluster):
    conn = _conn(sandbox_cluster)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "holder", "namespace": "inuse", "labels": OWNED},
        "spec": {
            "nodeName": "sandbox-node-2",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"huawei.com/ascend-1980": "3"}}}
            ],
        },
    }
    kube.apply_objects(conn, [_namespace("inuse"), pod])
    nodes = {n.name: n for n in kube.list_nodes(conn)}
    assert len(nodes) == 4
    assert all(n.capacity == {"huawei.com/ascend-1980": 8} for n in nodes.values())
    assert nodes["sandbox-node-2"].in_use["huawei.com/ascend-1980"] >= 3
    assert kube.get_version(conn).startswith("v1.")
    kube.delete_object(conn, "v1", "Pod", "inuse", "holder")


def test_pod_log_lines_of_a_missing_pod_fails_fast_with_a_readable_error(sandbox_cluster):
    from kube.workloads import pod_log_lines

    conn = _conn(sandbox_cluster)
    kube.apply_objects(conn, [_namespace("logs-missing")])
    with pytest.raises(kube.KubeError) as caught:
        pod_log_lines(conn, "logs-missing", "no-such-pod", tail_lines=10, since_seconds=6, timeout_s=1.0)
    assert "read the log of pod logs-missing/no-such-pod" in caught.value.message
