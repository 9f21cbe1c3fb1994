"""ModelServing: groups and roles as pods, status, rollouts, and recovery of lost pods per recoveryPolicy."""

from __future__ import annotations

import copy
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"


def _role(name, replicas=1, workers=0):
    container = {
        "name": "engine",
        "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve", "m", "--port", "8000"],
    }
    role = {
        "name": name,
        "replicas": replicas,
        "workerReplicas": workers,
        "entryTemplate": {"spec": {"containers": [container]}},
    }
    if workers:
        role["workerTemplate"] = {"spec": {"containers": [copy.deepcopy(container)]}}
    return role


def _serving(name, policy, roles, replicas=1):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "recoveryPolicy": policy, "template": {"roles": roles}},
    }


@pytest.fixture
def env(sandbox_cluster):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    custom = client.CustomObjectsApi(sandbox_cluster.api_client())
    namespace = f"ms-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    yield sandbox_cluster, core, custom, namespace
    core.delete_namespace(namespace)


def _uids(core, namespace):
    return {
        p.metadata.name: p.metadata.uid
        for p in core.list_namespaced_pod(namespace).items
        if not p.metadata.deletion_timestamp
    }


def _available(custom, namespace, name, groups):
    ms = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return (ms.get("status") or {}).get("availableReplicas") == groups and ms


def test_groups_roles_and_workers_become_labelled_pods_and_status(env):
    cluster, core, custom, namespace = env
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        _serving("pd", "RoleRecreate", [_role("prefill", 2), _role("decode", 1, workers=1)]),
    )
    ms = cluster.wait_for(
        lambda: _available(custom, namespace, "pd", 1), timeout=30, message="one available group"
    )
    names = sorted(_uids(core, namespace))
    assert names == ["pd-0-decode-0-0", "pd-0-decode-0-1", "pd-0-prefill-0-0", "pd-0-prefill-1-0"]
    worker = core.read_namespaced_pod("pd-0-decode-0-1", namespace)
    assert worker.metadata.labels["modelserving.volcano.sh/role-id"] == "decode-0"
    assert "modelserving.volcano.sh/entry" not in worker.metadata.labels
    env_vars = {e.name: e.value for e in worker.spec.containers[0].env}
    assert env_vars["GROUP_SIZE"] == "2" and env_vars["WORKER_INDEX"] == "1"
    assert env_vars["ENTRY_ADDRESS"] == f"pd-0-decode-0-0.{namespace}"
    assert core.read_namespaced_service("pd-0-decode-0-0", namespace).spec.cluster_ip == "None"
    status = ms["status"]
    assert status["replicas"] == 1 and status["updatedReplicas"] == 1
    assert status["labelSelector"] == "modelserving.volcano.sh/name=pd"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Available"] == "True"


def test_serving_group_recreate_replaces_the_whole_group_when_one_pod_is_lost(env):
    cluster, core, custom, namespace = env
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        _serving("grp", "ServingGroupRecreate", [_role("prefill"), _role("decode")]),
    )
    cluster.wait_for(lambda: _available(custom, namespace, "grp", 1), timeout=30)
    before = _uids(core, namespace)
    core.delete_namespaced_pod("grp-0-decode-0-0", namespace, grace_period_seconds=0)

    def replaced():
        after = _uids(core, namespace)
        return len(after) == 2 and all(after.get(n) not in (None, before[n]) for n in before)

    cluster.wait_for(replaced, timeout=30, message="both pods of the group recreated")


def test_role_recreate_replaces_only_the_lost_role_instance(env):
    cluster, core, custom, namespace = env
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        _serving("role", "RoleRecreate", [_role("prefill"), _role("decode")]),
    )
    cluster.wait_for(lambda: _available(custom, namespace, "role", 1), timeout=30)
    before = _uids(core, namespace)
    core.delete_namespaced_pod("role-0-decode-0-0", namespace, grace_period_seconds=0)
    after = cluster.wait_for(
        lambda: (
            (u := _uids(core, namespace)).get("role-0-decode-0-0") not in (None, before["role-0-decode-0-0"])
            and u
        ),
        timeout=30,
    )
    assert after["role-0-prefill-0-0"] == before["role-0-prefill-0-0"]


def test_recovery_policy_none_leaves_a_lost_pod_gone(env):
    cluster, core, custom, namespace = env
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _serving("none", "None", [_role("decode")])
    )
    cluster.wait_for(lambda: _available(custom, namespace, "none", 1), timeout=30)
    core.delete_namespaced_pod("none-0-decode-0-0", namespace, grace_period_seconds=0)
    with pytest.raises(AssertionError):
        cluster.wait_for(lambda: _uids(core, namespace), timeout=2)
    with pytest.raises(ApiException):
        core.read_namespaced_pod("none-0-decode-0-0", namespace)


def test_template_change_rolls_groups_to_the_new_revision(env):
    cluster, core, custom, namespace = env
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _serving("roll", "RoleRecreate", [_role("decode")], replicas=2)
    )
    cluster.wait_for(lambda: _available(custom, namespace, "roll", 2), timeout=30)
    old_revision = core.read_namespaced_pod("roll-0-decode-0-0", namespace).metadata.labels[
        "modelserving.volcano.sh/revision"
    ]
    patch = {
        "spec": {
            "template": {
                "roles": [
                    {
                        **_role("decode"),
                        "entryTemplate": {
                            "metadata": {"labels": {"v": "2"}},
                            "spec": _role("decode")["entryTemplate"]["spec"],
                        },
                    }
                ]
            }
        }
    }
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "roll", patch)

    def rolled():
        pods = [p for p in core.list_namespaced_pod(namespace).items if not p.metadata.deletion_timestamp]
        revisions = {p.metadata.labels["modelserving.volcano.sh/revision"] for p in pods}
        ready = _available(custom, namespace, "roll", 2)
        return (
            len(pods) == 2
            and old_revision not in revisions
            and all(p.metadata.labels.get("v") == "2" for p in pods)
            and ready
        )

    ms = cluster.wait_for(rolled, timeout=40, message="both groups on the new revision")
    assert ms["status"]["updatedReplicas"] == 2
    assert ms["status"]["observedGeneration"] == ms["metadata"]["generation"] == 2
