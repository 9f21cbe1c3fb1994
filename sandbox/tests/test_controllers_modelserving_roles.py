"""ModelServing roles: scaling one role touches no other pod; RoleRollingUpdate rolls only changed roles."""

from __future__ import annotations

import copy
import uuid

import pytest
from kubernetes import client

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"


def _role(name: str, replicas: int = 1) -> dict:  # type: ignore[type-arg]
    container = {"name": "engine", "image": "vllm/vllm-openai:v0.10.1", "command": ["vllm", "serve", "m"]}
    return {
        "name": name,
        "replicas": replicas,
        "workerReplicas": 0,
        "entryTemplate": {"spec": {"containers": [container]}},
    }


def _serving(name: str, roles: list, strategy: str | None = None) -> dict:  # type: ignore[type-arg]
    spec = {"replicas": 1, "recoveryPolicy": "ServingGroupRecreate", "template": {"roles": roles}}
    if strategy:
        spec["rolloutStrategy"] = {"type": strategy}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.fixture
def env(sandbox_cluster):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    custom = client.CustomObjectsApi(sandbox_cluster.api_client())
    namespace = f"msr-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    yield sandbox_cluster, core, custom, namespace
    core.delete_namespace(namespace)


def _ready_uids(core, namespace) -> dict[str, str]:
    return {
        p.metadata.name: p.metadata.uid
        for p in core.list_namespaced_pod(namespace).items
        if not p.metadata.deletion_timestamp
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    }


def _settled(custom, namespace, name):
    ms = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    status = ms.get("status") or {}
    done = (
        status.get("observedGeneration") == ms["metadata"]["generation"]
        and status.get("availableReplicas") == status.get("updatedReplicas") == 1
    )
    return done and ms


def test_scaling_a_role_keeps_every_existing_pod(env):
    cluster, core, custom, namespace = env
    body = _serving("pd", [_role("prefill"), _role("decode")])
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    before = cluster.wait_for(lambda: len(u := _ready_uids(core, namespace)) == 2 and u, timeout=30)
    revision = core.read_namespaced_pod("pd-0-prefill-0-0", namespace).metadata.labels[
        "modelserving.volcano.sh/revision"
    ]
    scaled = copy.deepcopy(body["spec"]["template"])
    scaled["roles"][1]["replicas"] = 2
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "pd", {"spec": {"template": scaled}}
    )
    after = cluster.wait_for(lambda: len(u := _ready_uids(core, namespace)) == 3 and u, timeout=30)
    assert {n: after[n] for n in before} == before
    assert "pd-0-decode-1-0" in after
    labels = core.read_namespaced_pod("pd-0-decode-1-0", namespace).metadata.labels
    assert labels["modelserving.volcano.sh/revision"] == revision
    cluster.wait_for(lambda: _settled(custom, namespace, "pd"), timeout=30)


def test_role_rolling_update_replaces_only_the_changed_role(env):
    cluster, core, custom, namespace = env
    body = _serving("rr", [_role("prefill"), _role("decode", 2)], strategy="RoleRollingUpdate")
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    before = cluster.wait_for(lambda: len(u := _ready_uids(core, namespace)) == 3 and u, timeout=30)
    hashes = {
        n: core.read_namespaced_pod(n, namespace).metadata.labels[
            "modelserving.volcano.sh/role-template-hash"
        ]
        for n in before
    }
    changed = copy.deepcopy(body["spec"]["template"])
    changed["roles"][0]["entryTemplate"]["spec"]["containers"][0]["args"] = ["--max-model-len", "4096"]
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "rr", {"spec": {"template": changed}}
    )

    def prefill_replaced():
        uids = _ready_uids(core, namespace)
        new = uids.get("rr-0-prefill-0-0") not in (None, before["rr-0-prefill-0-0"])
        return len(uids) == 3 and new and uids

    after = cluster.wait_for(prefill_replaced, timeout=30, message="the prefill pod replaced")
    assert after["rr-0-decode-0-0"] == before["rr-0-decode-0-0"]
    assert after["rr-0-decode-1-0"] == before["rr-0-decode-1-0"]
    prefill = core.read_namespaced_pod("rr-0-prefill-0-0", namespace)
    assert prefill.metadata.labels["modelserving.volcano.sh/role-template-hash"] != hashes["rr-0-prefill-0-0"]
    assert prefill.spec.containers[0].args == ["--max-model-len", "4096"]
    ms = cluster.wait_for(lambda: _settled(custom, namespace, "rr"), timeout=30)
    assert ms["status"]["observedGeneration"] == 2
