"""Tandem with exactly the RBAC it ships (docker/k8s/rbac.yaml), against a sandbox that enforces it.

The sandbox is registered with a ServiceAccount token (TokenRequest API, as `kubectl create token`)
bound to the shipped ClusterRole; every backend and connector is deployed, scaled, rolled back and
removed with it. Taking any one rule out shows up in the cluster check as that exact rule, and in
preflight before anything is applied, never as a 403 part-way through a deploy.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from deployments.models import Kind, State
from deployments.tests.sandbox_helpers import deploy_now, register

ROOT = Path(__file__).resolve().parents[2]
RBAC_YAML = ROOT / "docker" / "k8s" / "rbac.yaml"
pytestmark = pytest.mark.usefixtures("fast_deploys")

# Every connector, each with an engine that drives it, so every engine is covered too.
CONNECTOR_ENGINES = [
    ("mooncake", "vllm-ascend"),
    ("mooncake-store", "vllm"),
    ("nixl", "sglang"),
    ("lmcache", "vllm"),
    ("llm-datadist", "mindie"),
    ("none", "vllm"),
]
CASES = [(c, e, b) for c, e in CONNECTOR_ENGINES for b in ("kthena", "deployments")]


def shipped_rbac() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = {d["kind"]: d for d in yaml.safe_load_all(RBAC_YAML.read_text()) if d}
    return docs["ClusterRole"], docs["ClusterRoleBinding"]


def _kubectl_ok(sandbox, *args: str, input: str | None = None) -> str:  # type: ignore[no-untyped-def]
    result = sandbox.kubectl(*args, input=input)
    assert result.returncode == 0, result.stderr
    return result.stdout


def service_account_with(sandbox, rules: list[dict[str, Any]]) -> str:  # type: ignore[no-untyped-def]
    """A new ServiceAccount bound cluster-wide to a copy of the shipped ClusterRole with ``rules``;
    returns its token from `kubectl create token`."""
    suffix = uuid.uuid4().hex[:6]
    namespace, name = f"tandem-{suffix}", "tandem"
    role, binding = (copy.deepcopy(d) for d in shipped_rbac())
    role["metadata"]["name"] = f"tandem-{suffix}"
    role["rules"] = rules
    binding["metadata"]["name"] = f"tandem-{suffix}"
    binding["roleRef"]["name"] = role["metadata"]["name"]
    binding["subjects"] = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    _kubectl_ok(sandbox, "create", "namespace", namespace)
    _kubectl_ok(sandbox, "create", "serviceaccount", name, "-n", namespace)
    _kubectl_ok(sandbox, "apply", "-f", "-", input=yaml.safe_dump_all([role, binding]))
    return _kubectl_ok(sandbox, "create", "token", name, "-n", namespace, "--duration=1h").strip()


def register_with_token(sandbox, token: str, name: str):  # type: ignore[no-untyped-def]
    from clusters.services import cluster_register

    return cluster_register(name=name, server=sandbox.server, token=token)


@pytest.fixture(scope="module")
def audit_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.log"


@pytest.fixture(scope="module")
def lab_sandbox(audit_path):
    """As the package's sandbox (both accelerator kinds), with an audit log of every request."""
    from sandbox.testing import SandboxCluster

    with SandboxCluster(
        nodes=4,
        accelerators=["huawei.com/ascend-1980=8", "nvidia.com/gpu=8"],
        extra_args=["--audit-log", str(audit_path)],
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def shipped_token(lab_sandbox) -> str:
    return service_account_with(lab_sandbox, shipped_rbac()[0]["rules"])


@pytest.fixture
def least(lab_sandbox, shipped_token, db):
    """The sandbox registered with the shipped-RBAC ServiceAccount token, freshly checked."""
    from clusters.services import cluster_check

    cluster = register_with_token(lab_sandbox, shipped_token, "least-privilege")
    return cluster_check(cluster_id=cluster.pk)


@pytest.fixture
def admin_conn(lab_sandbox, db):
    from clusters.selectors import cluster_connection

    return cluster_connection(register(lab_sandbox, name="admin-view"))


def _master(sandbox) -> str:  # type: ignore[no-untyped-def]
    """A Mooncake master Service (created as the admin) for mooncake-store; its address."""
    namespace = f"kv-{uuid.uuid4().hex[:6]}"
    _kubectl_ok(sandbox, "create", "namespace", namespace)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "mooncake-master", "namespace": namespace},
        "spec": {"ports": [{"port": 50051, "targetPort": 50051}], "selector": {"app": "mooncake-master"}},
    }
    _kubectl_ok(sandbox, "create", "-f", "-", input=json.dumps(service))
    return f"mooncake-master.{namespace}.svc:50051"


def _spec(sandbox, connector: str, engine: str, backend: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from topologies.tests.combinations import CONNECTOR_FIELDS, combination

    fields = dict(CONNECTOR_FIELDS.get(connector, {}))
    if connector == "mooncake-store":
        fields["master_address"] = _master(sandbox)
    spec = combination(engine, connector, backend, namespace=f"lp{uuid.uuid4().hex[:8]}")
    spec["connector"].update(fields)
    return spec


def test_the_shipped_rbac_is_healthy_and_grants_everything_tandem_asks(least) -> None:
    assert least.health_state == "healthy", least.last_error
    assert least.permissions and all(p["allowed"] for p in least.permissions)


@pytest.mark.parametrize(("connector", "engine", "backend"), CASES, ids=["-".join(c) for c in CASES])
def test_deploy_scale_roll_back_and_remove_with_the_shipped_rbac(
    least, lab_sandbox, admin_conn, operator, connector, engine, backend
) -> None:
    import kube
    from deployments import runner
    from deployments.services import deployment_start, topology_scale_start
    from kube.labels import topology_selector
    from topologies.models import Topology
    from topologies.services import topology_create

    topology = topology_create(
        cluster=least, spec=_spec(lab_sandbox, connector, engine, backend), actor=operator
    )
    namespace, pk = topology.namespace, topology.pk
    first = deploy_now(topology, operator)
    assert first.state == State.SUCCEEDED, (first.error, first.diagnosis)
    assert kube.get_object(admin_conn, "v1", "Namespace", None, namespace) is not None, "created by apply"

    scaled = topology_scale_start(
        topology=topology, role="decode", replicas=2, actor=operator, source_ip=None
    )
    assert runner.run(scaled.pk, worker="test-worker") == "claimed"
    scaled.refresh_from_db()
    assert scaled.state == State.SUCCEEDED, (scaled.error, scaled.diagnosis)

    topology.refresh_from_db()
    rollback = deploy_now(topology, operator, revision=topology.revisions.get(number=1), kind=Kind.ROLLBACK)
    assert rollback.state == State.SUCCEEDED, (rollback.error, rollback.diagnosis)
    assert topology.deployed_revision.number == 1

    removal = deployment_start(topology=topology, kind=Kind.DELETE, actor=operator, source_ip=None)
    assert runner.run(removal.pk, worker="test-worker") == "claimed"
    removal.refresh_from_db()
    assert removal.state == State.SUCCEEDED, (removal.error, removal.diagnosis)
    assert not Topology.objects.filter(pk=pk).exists()
    assert kube.list_pods(admin_conn, namespace, topology_selector(pk)) == []
    for api_version, kind in (("apps/v1", "Deployment"), ("v1", "ConfigMap"), ("v1", "Service")):
        assert kube.list_objects(admin_conn, api_version, kind, namespace) == [], kind


def _rule_cases() -> list[tuple[int, str]]:
    rules = shipped_rbac()[0]["rules"]
    return [(i, ",".join(r["resources"])) for i, r in enumerate(rules)]


@pytest.mark.parametrize(("index", "resources"), _rule_cases(), ids=[c[1] for c in _rule_cases()])
def test_each_rule_left_out_is_named_by_the_check_and_by_preflight(
    lab_sandbox, db, operator, index, resources
) -> None:
    from clusters.access import REQUIRED_ACCESS, rule_snippet, rules_grants
    from clusters.selectors import cluster_missing_rules
    from clusters.services import cluster_check
    from topologies.preflight import spec_needs
    from topologies.services import spec_preflight
    from topologies.spec import TopologySpec

    rules = shipped_rbac()[0]["rules"]
    left_out = rules[index]
    token = service_account_with(lab_sandbox, rules[:index] + rules[index + 1 :])
    cluster = cluster_check(cluster_id=register_with_token(lab_sandbox, token, f"without-{index}").pk)
    # Every authenticated user may review its own access and rules (system:basic-user): that rule changes
    # nothing.
    lost = {t for t in rules_grants([left_out]) if t[0] != "authorization.k8s.io"}
    denied = {(p["group"], p["resource"], p["verb"]) for p in cluster.permissions if not p["allowed"]}
    assert denied == lost
    missing = [n for n in REQUIRED_ACCESS if (n.group, n.resource, n.verb) in lost]
    assert cluster_missing_rules(cluster) == rule_snippet(missing)
    if any(not n.only_for for n in missing):
        assert cluster.health_state == "degraded"
        assert rule_snippet([n for n in missing if not n.only_for]) in cluster.last_error
    else:
        assert cluster.health_state == "healthy", cluster.last_error

    kthena = any(g.endswith("volcano.sh") for g in left_out["apiGroups"])
    spec = _spec(lab_sandbox, "mooncake-store", "vllm", "kthena" if kthena else "deployments")
    needed = [n for n in spec_needs(TopologySpec.from_dict(spec)) if (n.group, n.resource, n.verb) in lost]
    findings = spec_preflight(cluster=cluster, spec=spec)
    blocked = [f for f in findings if f.code == "permission_denied"]
    if needed:
        assert len(blocked) == 1, findings
        assert blocked[0].fix.endswith(rule_snippet(needed))
    else:
        assert blocked == [], findings


def test_a_deploy_without_config_map_rights_stops_at_preflight_not_at_a_403(
    lab_sandbox, admin_conn, operator, db
) -> None:
    import kube
    from clusters.services import cluster_check
    from topologies.services import topology_create

    rules = copy.deepcopy(shipped_rbac()[0]["rules"])
    for rule in rules:
        if "configmaps" in rule["resources"]:
            rule["resources"].remove("configmaps")
    token = service_account_with(lab_sandbox, rules)
    cluster = cluster_check(cluster_id=register_with_token(lab_sandbox, token, "no-configmaps").pk)
    assert cluster.health_state == "degraded"
    assert (
        '- apiGroups: [""]\n  resources: ["configmaps"]\n  verbs: ["delete", "get", "patch"]'
        in cluster.last_error
    )
    topology = topology_create(
        cluster=cluster, spec=_spec(lab_sandbox, "mooncake-store", "vllm", "kthena"), actor=operator
    )
    deployment = deploy_now(topology, operator)
    assert deployment.state == State.FAILED
    assert [d["code"] for d in deployment.diagnosis] == ["permission_denied"]
    assert "may not delete get patch configmaps" in deployment.diagnosis[0]["message"]
    assert deployment.diagnosis[0]["fix"].endswith(
        '- apiGroups: [""]\n  resources: ["configmaps"]\n  verbs: ["delete", "get", "patch"]'
    )
    assert "nothing was applied" in [s.message for s in deployment.steps.all()][-1]
    assert kube.get_object(admin_conn, "v1", "Namespace", None, topology.namespace) is None


def _subject(token: str) -> str:
    """The username a ServiceAccount token authenticates as (its `sub` claim)."""
    payload = token.split(".")[1]
    return str(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"])


def _audited(audit_path: Path, username: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in audit_path.read_text().splitlines() if line]
    return [e for e in events if e["user"].get("username") == username]


def test_the_jobs_call_exactly_the_tables_verbs_and_are_never_refused(
    lab_sandbox, audit_path, admin_conn, operator, db
) -> None:
    """One ServiceAccount of its own runs the check, preflight, deploy, scale, roll back and remove on
    both backends; the audit log shows no 401/403, only permissions in the table, and every row of the
    table those jobs need."""
    from clusters import access
    from clusters.services import cluster_check
    from deployments import runner
    from deployments.services import deployment_start, topology_scale_start
    from rebalancing.services.owners import owners_read
    from topologies.services import topology_create

    token = service_account_with(lab_sandbox, shipped_rbac()[0]["rules"])
    cluster = cluster_check(cluster_id=register_with_token(lab_sandbox, token, "audited").pk)
    assert cluster.health_state == "healthy", cluster.last_error
    for backend in ("kthena", "deployments"):
        topology = topology_create(
            cluster=cluster, spec=_spec(lab_sandbox, "mooncake-store", "vllm", backend), actor=operator
        )
        assert deploy_now(topology, operator).state == State.SUCCEEDED
        # The planner's auto mode may check who else sets the replicas (HPA, KEDA, Kthena's autoscaler).
        assert owners_read(topology)[2] == []
        scaled = topology_scale_start(
            topology=topology, role="decode", replicas=2, actor=operator, source_ip=None
        )
        runner.run(scaled.pk, worker="test-worker")
        topology.refresh_from_db()
        first = topology.revisions.get(number=1)
        assert deploy_now(topology, operator, revision=first, kind=Kind.ROLLBACK).state == State.SUCCEEDED
        removal = deployment_start(topology=topology, kind=Kind.DELETE, actor=operator, source_ip=None)
        runner.run(removal.pk, worker="test-worker")
        removal.refresh_from_db()
        assert removal.state == State.SUCCEEDED, removal.error
    events = _audited(audit_path, _subject(token))
    assert events, "the audit log has the ServiceAccount's requests"
    refused = [
        (e["verb"], e["requestURI"], e["responseStatus"]["code"])
        for e in events
        if e["responseStatus"]["code"] in (401, 403)
    ]
    assert refused == []
    used = set()
    for event in events:
        ref = event.get("objectRef")
        if ref is None:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
    assert sorted(used - access.granted()) == [], "a job uses a permission the table does not list"
    exercised = {access.REGISTER, access.CHECK, access.PREFLIGHT, access.DEPLOY, access.REMOVE}
    expected = access.granted(
        p
        for p in access.PERMISSIONS
        if not p.only_for and access.GRANT not in p.jobs and set(p.jobs) & exercised
    )
    assert sorted(expected - used) == [], "the table lists permissions these jobs never use"
