"""Deploys against a real sandbox: Ready, failures diagnosed and rolled back, rollback, scale, delete."""

from __future__ import annotations

import pytest

from deployments.models import Kind, State
from deployments.tests.sandbox_helpers import (
    deploy_now,
    pod_templates,
    ready_pods,
    ready_roles,
    revision_with_manifests,
)

PRESETS = ["deepseek-ascend-mooncake", "qwen-gpu-nixl", "qwen-sglang-mooncake"]
pytestmark = pytest.mark.usefixtures("fast_deploys")


def _update(topology, operator, change):
    from topologies.services import topology_update

    spec = dict(topology.spec)
    change(spec)
    return topology_update(topology=topology, spec=spec, actor=operator, message="test change")


def _running(new_topology, operator, preset: str = "deepseek-ascend-mooncake"):
    topology = new_topology(preset)
    first = deploy_now(topology, operator)
    assert first.state == State.SUCCEEDED, (first.error, first.diagnosis)
    return topology


def _assert_previous_still_running(topology, conn, deployment, number: int = 1):
    from audit.models import AuditEvent

    assert deployment.state == State.ROLLED_BACK, (deployment.error, deployment.diagnosis)
    outcome = AuditEvent.objects.filter(action="deployment.rolled_back", target_id=str(topology.pk)).get()
    assert outcome.actor_label == "system" and outcome.detail["deployment"] == deployment.pk
    assert deployment.rolled_back_to.number == number
    assert topology.deployed_revision.number == number
    assert len(ready_pods(conn, topology, number)) == deployment.pods_total > 0


@pytest.mark.parametrize("preset", PRESETS)
def test_seed_preset_deploys_to_ready(new_topology, operator, conn, preset):
    topology = new_topology(preset)
    deployment = deploy_now(topology, operator)
    assert deployment.state == State.SUCCEEDED, (deployment.error, deployment.diagnosis)
    assert topology.deployed_revision == topology.current_revision
    assert deployment.pods_ready == deployment.pods_total == len(ready_pods(conn, topology, 1)) > 0
    messages = [s.message for s in deployment.steps.all()]
    assert "Running preflight checks" in messages
    assert messages[-1] == "Revision 1 is running: all pods Ready"


def test_broken_image_tag_is_diagnosed_and_previous_revision_keeps_running(new_topology, operator, conn):
    topology = _running(new_topology, operator)
    _update(topology, operator, lambda s: s.update(image=s["image"] + "-broken"))
    deployment = deploy_now(topology, operator)
    codes = [d["code"] for d in deployment.diagnosis]
    assert codes == ["image_pull"], (deployment.state, [s.message for s in deployment.steps.all()])
    assert "-broken" in deployment.diagnosis[0]["message"]
    assert "registry" in deployment.diagnosis[0]["fix"]
    _assert_previous_still_running(topology, conn, deployment)


def test_bad_engine_argument_crash_loop_quotes_the_engine_error(new_topology, operator, conn):
    topology = _running(new_topology, operator)
    _update(topology, operator, lambda s: s["roles"]["decode"].update(extra_args=["--max-model-len", "lots"]))
    deployment = deploy_now(topology, operator)
    [found] = deployment.diagnosis
    assert found["code"] == "crash_loop"
    assert "invalid human_readable_int_or_auto value: 'lots'" in found["message"]  # vLLM 0.32's type
    assert all("decode" in pod for pod in found["pods"])
    _assert_previous_still_running(topology, conn, deployment)


def test_wrong_accelerator_resource_is_stopped_by_preflight(new_topology, operator, conn):
    topology = _running(new_topology, operator)
    _update(
        topology,
        operator,
        lambda s: s["roles"]["prefill"].update(accelerator_resource="huawei.com/Ascend910"),
    )
    deployment = deploy_now(topology, operator)
    assert deployment.state == State.FAILED
    text = " ".join(d["message"] + d["fix"] for d in deployment.diagnosis)
    assert "huawei.com/Ascend910" in text and "huawei.com/ascend-1980" in text
    assert "nothing was applied" in [s.message for s in deployment.steps.all()][-1]
    assert topology.deployed_revision.number == 1 and len(ready_pods(conn, topology, 1)) == 2


def test_wrong_accelerator_resource_at_runtime_names_what_nodes_offer(new_topology, operator, conn):
    topology = _running(new_topology, operator)

    def rename(obj):
        for template in pod_templates(obj):
            for container in template["spec"]["containers"]:
                for part in ("requests", "limits"):
                    asked = container.get("resources", {}).get(part, {})
                    if "huawei.com/ascend-1980" in asked:
                        asked["huawei.com/Ascend910"] = asked.pop("huawei.com/ascend-1980")

    revision_with_manifests(topology, rename, "resource renamed")
    deployment = deploy_now(topology, operator)
    [found] = deployment.diagnosis
    assert found["code"] == "resource_name_wrong"
    assert "no node offers `huawei.com/Ascend910`" in found["message"]
    assert "`huawei.com/ascend-1980`" in found["message"]
    _assert_previous_still_running(topology, conn, deployment)


def test_missing_configmap_mount_names_the_configmap(new_topology, operator, conn):
    topology = _running(new_topology, operator)

    def mount(obj):
        for template in pod_templates(obj):
            template["spec"].setdefault("volumes", []).append(
                {"name": "engine-config", "configMap": {"name": "engine-config"}}
            )
            container = template["spec"]["containers"][0]
            container.setdefault("volumeMounts", []).append(
                {"name": "engine-config", "mountPath": "/etc/engine"}
            )

    revision_with_manifests(topology, mount, "mount a ConfigMap")
    deployment = deploy_now(topology, operator)
    assert {d["code"] for d in deployment.diagnosis} == {"mount_missing"}
    assert "ConfigMap `engine-config`" in deployment.diagnosis[0]["message"]
    _assert_previous_still_running(topology, conn, deployment)


def test_missing_mooncake_master_is_diagnosed_as_connector_backend(new_topology, operator, conn):
    topology = _running(new_topology, operator)
    _update(
        topology,
        operator,
        lambda s: s["connector"].update(type="mooncake-store", master_address="10.255.0.9:50051"),
    )
    deployment = deploy_now(topology, operator)
    codes = {d["code"] for d in deployment.diagnosis}
    assert codes == {"connector_backend_missing"}, deployment.diagnosis
    assert "Mooncake master" in deployment.diagnosis[0]["message"]
    _assert_previous_still_running(topology, conn, deployment)


def test_first_deploy_failure_has_nothing_to_roll_back_to(new_topology, operator):
    topology = new_topology(image="ghcr.io/volcano-sh/kthena-engine:v1-broken")
    deployment = deploy_now(topology, operator)
    assert deployment.state == State.FAILED
    assert deployment.diagnosis[0]["code"] == "image_pull"
    assert "no earlier good revision" in [s.message for s in deployment.steps.all()][-1]
    assert topology.deployed_revision is None


def test_manual_rollback_returns_to_an_earlier_revision(new_topology, operator, conn):
    topology = _running(new_topology, operator)
    _update(topology, operator, lambda s: s["roles"]["decode"].update(replicas=2))
    second = deploy_now(topology, operator)
    assert second.state == State.SUCCEEDED and len(ready_pods(conn, topology, 2)) == 3
    first = topology.revisions.get(number=1)
    rollback = deploy_now(topology, operator, revision=first, kind=Kind.ROLLBACK)
    assert rollback.state == State.SUCCEEDED, (rollback.error, rollback.diagnosis)
    assert topology.deployed_revision.number == 1
    assert len(ready_pods(conn, topology, 1)) == 2
    assert ready_roles(conn, topology) == ["decode", "prefill"]


def test_scale_adds_decode_pods(new_topology, operator, conn):
    from deployments import runner
    from deployments.services import topology_scale_start

    topology = _running(new_topology, operator)
    deployment = topology_scale_start(
        topology=topology, role="decode", replicas=3, actor=operator, source_ip=None
    )
    assert runner.run(deployment.pk, worker="test-worker") == "claimed"
    deployment.refresh_from_db()
    topology.refresh_from_db()
    assert deployment.state == State.SUCCEEDED, (deployment.error, deployment.diagnosis)
    assert topology.deployed_revision.number == 2
    roles = sorted(p.labels.get("tandem.io/role") for p in ready_pods(conn, topology, 2))
    assert roles == ["decode", "decode", "decode", "prefill"]


def test_delete_removes_cluster_objects_then_the_topology(new_topology, operator, conn):
    import kube
    from deployments import runner
    from deployments.services import deployment_start
    from topologies.models import Topology

    topology = _running(new_topology, operator)
    namespace, pk = topology.namespace, topology.pk
    deployment = deployment_start(topology=topology, kind=Kind.DELETE, actor=operator, source_ip=None)
    assert runner.run(deployment.pk, worker="test-worker") == "claimed"
    deployment.refresh_from_db()
    assert deployment.state == State.SUCCEEDED, deployment.error
    assert not Topology.objects.filter(pk=pk).exists()
    assert deployment.topology is None and deployment.topology_name == topology.name
    assert kube.list_objects(conn, "workload.serving.volcano.sh/v1alpha1", "ModelServing", namespace) == []


def test_objects_left_out_of_the_new_revision_are_pruned(new_topology, operator, conn):
    import kube

    topology = _running(new_topology, operator)
    old_kinds = {o["kind"] for o in topology.current_revision.manifests}
    _update(topology, operator, lambda s: s.update(backend="deployments"))
    deployment = deploy_now(topology, operator)
    assert deployment.state == State.SUCCEEDED, (deployment.error, deployment.diagnosis)
    new_kinds = {o["kind"] for o in topology.current_revision.manifests}
    assert "ModelServing" in old_kinds and "ModelServing" not in new_kinds
    assert (
        kube.list_objects(conn, "workload.serving.volcano.sh/v1alpha1", "ModelServing", topology.namespace)
        == []
    )
    assert any(s.message.startswith("Pruned ") for s in deployment.steps.all())
    pods = ready_pods(conn, topology, 2)
    assert len(pods) == deployment.pods_total and ready_roles(conn, topology) == [
        "decode",
        "prefill",
        "router",
    ]
    assert not any("modelserving.volcano.sh/name" in p.labels for p in pods)


def test_cancel_stops_the_deploy_and_returns_to_the_last_good_revision(new_topology, operator, conn):
    from deployments import runner
    from deployments.services import deployment_cancel, deployment_start

    topology = _running(new_topology, operator)
    _update(topology, operator, lambda s: s["roles"]["decode"].update(replicas=2))
    deployment = deployment_start(topology=topology, actor=operator, source_ip=None)
    deployment_cancel(deployment=deployment, actor=operator, source_ip=None)
    assert runner.run(deployment.pk, worker="test-worker") == "claimed"
    deployment.refresh_from_db()
    topology.refresh_from_db()
    assert "Failed: cancelled by an operator" in [s.message for s in deployment.steps.all()]
    _assert_previous_still_running(topology, conn, deployment)
    assert ready_roles(conn, topology) == ["decode", "prefill"]


def test_insufficient_capacity_at_runtime_says_how_much_is_asked_and_free(new_topology, operator, conn):
    topology = _running(new_topology, operator)

    def grow(obj):
        for template in pod_templates(obj):
            for container in template["spec"]["containers"]:
                for part in ("requests", "limits"):
                    asked = container.get("resources", {}).get(part, {})
                    if "huawei.com/ascend-1980" in asked:
                        asked["huawei.com/ascend-1980"] = "16"

    revision_with_manifests(topology, grow, "16 NPUs per pod")
    deployment = deploy_now(topology, operator)
    [found] = deployment.diagnosis
    assert found["code"] == "insufficient_capacity", deployment.diagnosis
    assert "not enough free `huawei.com/ascend-1980`" in found["message"]
    assert "asks for 32" in found["message"]
    _assert_previous_still_running(topology, conn, deployment)
