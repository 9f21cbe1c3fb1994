"""Adopt a Kthena ModelServing (and a labelled Deployment pair) that Tandem did not create, on the sandbox
over real HTTP: it is listed, adopted as revision 1 running, its pods keep their uid and restart count,
the topology page finds them; releasing hands the objects back unchanged."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import yaml

import kube
from topologies.models import Topology

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parents[2] / "topologies" / "tests" / "data"


def _serving_yaml(namespace: str) -> str:
    docs = [d for d in yaml.safe_load_all((DATA / "import-kthena-pd.yaml").read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    return yaml.safe_dump_all(docs)


_SANDBOX = {}


def _pods(conn, namespace: str) -> dict[str, tuple[str, int, bool]]:
    """name → (uid, restarts, ready), read with kubectl as a person would check it."""
    out = _SANDBOX["cluster"].kubectl("get", "pods", "-n", namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    pods = {}
    for pod in json.loads(out.stdout)["items"]:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        pods[pod["metadata"]["name"]] = (
            pod["metadata"]["uid"],
            sum(c.get("restartCount", 0) for c in statuses),
            bool(statuses) and all(c.get("ready") for c in statuses),
        )
    return pods


def _spec_of(lab_sandbox, namespace: str, what: str) -> dict:
    out = lab_sandbox.kubectl("get", what, "-n", namespace, "-o", "json", "--show-managed-fields")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _wait_ready(lab_sandbox, conn, namespace: str, count: int) -> dict[str, tuple[str, int, bool]]:
    def ready() -> dict[str, tuple[str, int, bool]] | None:
        pods = _pods(conn, namespace)
        return pods if len(pods) == count and all(v[2] for v in pods.values()) else None

    return lab_sandbox.wait_for(
        ready,
        timeout=60,
        message=f"{count} Ready pods in {namespace}",
    )


@pytest.fixture
def namespace(lab_sandbox, conn):
    _SANDBOX["cluster"] = lab_sandbox
    name = f"a{uuid.uuid4().hex[:8]}"
    assert lab_sandbox.kubectl("create", "namespace", name).returncode == 0
    yield name
    lab_sandbox.kubectl(
        "delete",
        "modelroutes,modelservers,modelservings,deployments,services",
        "--all",
        "-n",
        name,
        "--wait=false",
    )
    deadline = time.monotonic() + 30
    while kube.list_pods(conn, name, "") and time.monotonic() < deadline:
        time.sleep(0.2)


def test_adopt_keeps_pods_running_and_release_hands_the_objects_back(
    api_client, operator, lab, conn, lab_sandbox, namespace
) -> None:
    created = lab_sandbox.kubectl("apply", "-f", "-", input=_serving_yaml(namespace))
    assert created.returncode == 0, created.stderr
    before = _wait_ready(lab_sandbox, conn, namespace, 3)
    original = _spec_of(lab_sandbox, namespace, "modelserving/qwen-pd")

    api_client.force_authenticate(operator)
    listed = api_client.get(f"/api/v1/topologies/adoptable/?cluster={lab.pk}")
    assert listed.status_code == 200, listed.json()
    mine = [c for c in listed.json() if c["namespace"] == namespace]
    assert [(c["kind"], c["name"], c["ok"]) for c in mine] == [("ModelServing", "qwen-pd", True)]
    assert set(mine[0]["objects"]) == {"ModelServing/qwen-pd", "ModelServer/qwen-pd", "ModelRoute/qwen-pd"}
    # carried in the role's pod-template overlay, as given (no longer dropped)
    assert any("init container downloader" in n["message"] for n in mine[0]["report"]["verbatim"])

    adopted = api_client.post(
        "/api/v1/topologies/adopt/",
        {"cluster": lab.pk, "kind": "ModelServing", "namespace": namespace, "name": "qwen-pd"},
        format="json",
    )
    assert adopted.status_code == 201, adopted.json()
    body = adopted.json()
    assert (
        body["current_revision"] == 1 and body["deployed_revision"] == 1 and body["drift_state"] == "in_sync"
    )
    topology = Topology.objects.get(pk=body["id"])
    live = _spec_of(lab_sandbox, namespace, "modelserving/qwen-pd")
    assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tandem"
    assert live["spec"] == original["spec"]
    assert "tandem" in [m["manager"] for m in live["metadata"]["managedFields"]]
    time.sleep(3)  # long enough for a controller to have replaced pods, had the apply changed a template
    assert _pods(conn, namespace) == before  # same pods, same uids, no restarts, still Ready
    assert api_client.get(f"/api/v1/topologies/adoptable/?cluster={lab.pk}").json() == [
        c
        for c in api_client.get(f"/api/v1/topologies/adoptable/?cluster={lab.pk}").json()
        if c["namespace"] != namespace
    ]

    from deployments.selectors import topology_pods

    assert sorted(p["name"] for p in topology_pods(topology)) == sorted(before)
    from deployments.services import topology_drift_check

    assert topology_drift_check(topology=topology) == []

    released = api_client.post(f"/api/v1/topologies/{topology.pk}/release/")
    assert released.status_code == 200, released.json()
    assert "ModelServing/qwen-pd" in released.json()["released"]
    assert not Topology.objects.filter(pk=topology.pk).exists()
    back = _spec_of(lab_sandbox, namespace, "modelserving/qwen-pd")
    assert back["spec"] == original["spec"]
    assert back["metadata"].get("labels", {}) == original["metadata"].get("labels", {})
    assert "tandem" not in [m["manager"] for m in back["metadata"]["managedFields"]]
    assert _pods(conn, namespace) == before


def test_a_labelled_deployment_pair_is_adoptable_and_an_unlabelled_one_is_not(
    api_client, operator, lab, conn, lab_sandbox, namespace
) -> None:
    from topologies.tests.test_import_export_api import PLAIN

    docs = [d for d in yaml.safe_load_all(PLAIN) if d and d["kind"] == "Deployment"]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        doc["spec"]["replicas"] = 1
        role = doc["metadata"]["name"].rsplit("-", 1)[1]
        doc["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] = role
        env = doc["spec"]["template"]["spec"]["containers"][0].get("env", [])
        doc["spec"]["template"]["spec"]["containers"][0]["env"] = [e for e in env if e["name"] != "HF_TOKEN"]
    unlabelled = json.loads(json.dumps(docs[0]))
    unlabelled["metadata"]["name"] = "other-prefill"
    del unlabelled["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
    unlabelled["spec"]["selector"]["matchLabels"] = {"app": "other"}
    unlabelled["spec"]["template"]["metadata"]["labels"]["app"] = "other"
    created = lab_sandbox.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([*docs, unlabelled]))
    assert created.returncode == 0, created.stderr
    before = _wait_ready(lab_sandbox, conn, namespace, 3)
    api_client.force_authenticate(operator)
    mine = [
        c
        for c in api_client.get(f"/api/v1/topologies/adoptable/?cluster={lab.pk}").json()
        if c["namespace"] == namespace
    ]
    assert [(c["kind"], c["name"]) for c in mine] == [("Deployment", "llama")]
    adopted = api_client.post(
        "/api/v1/topologies/adopt/",
        {"cluster": lab.pk, "kind": "Deployment", "namespace": namespace, "name": "llama"},
        format="json",
    )
    assert adopted.status_code == 201, adopted.json()
    topology = Topology.objects.get(pk=adopted.json()["id"])
    assert topology.pod_selector == "app in (llama-decode,llama-prefill)"
    time.sleep(2)
    assert _pods(conn, namespace) == before
    from deployments.selectors import topology_pods

    assert sorted(p["name"] for p in topology_pods(topology)) == sorted(n for n in before if "other" not in n)


def test_viewers_cannot_list_or_adopt(api_client, viewer, lab) -> None:
    api_client.force_authenticate(viewer)
    assert api_client.get(f"/api/v1/topologies/adoptable/?cluster={lab.pk}").status_code == 403
    body = {"cluster": lab.pk, "kind": "ModelServing", "namespace": "x", "name": "y"}
    assert api_client.post("/api/v1/topologies/adopt/", body, format="json").status_code == 403
