"""Preflight: what will go wrong if this spec is deployed to that cluster. Pure: facts in, findings out.

``topologies.services.topology_preflight`` gathers the ``ClusterFacts`` through ``kube``; the
checks here only read them, so each one is tested with facts built by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from clusters.access import Need, needs_for_kinds, rule_snippet
from kube import labels
from topologies.preflight_facts import ERROR, WARNING, ClusterFacts, Finding, NodeFacts, ObjectFacts
from topologies.preflight_rollout import check_rollout_availability
from topologies.preflight_secrets import check_secret_references
from topologies.render import engine as engine_render
from topologies.render import kthena
from topologies.spec import TopologySpec

__all__ = [
    "ERROR",
    "WARNING",
    "ClusterFacts",
    "Finding",
    "NodeFacts",
    "ObjectFacts",
    "has_errors",
    "master_service",
    "run_preflight",
    "spec_needs",
]


def run_preflight(
    spec: TopologySpec,
    facts: ClusterFacts,
    *,
    topology_id: int | None = None,
    deployed: TopologySpec | None = None,
) -> list[Finding]:
    """``deployed``: the spec running now, when there is one (a rollout over it is checked too)."""
    if not facts.reachable:
        return [
            Finding(
                ERROR,
                "cluster_unreachable",
                "cluster",
                f"cannot read the cluster: {facts.error}",
                "check the cluster's connection on its page (server URL, token, CA), then retry",
            )
        ]
    findings: list[Finding] = check_unanswered(spec)
    if facts.partial:
        findings += check_backend(spec, facts) + check_ports(spec) + check_permissions(spec, facts)
        return sorted(findings, key=lambda f: (f.level != ERROR, f.field, f.code))
    findings += check_backend(spec, facts)
    findings += check_connector_backend(spec, facts)
    findings += check_accelerators(spec, facts)
    findings += check_namespace(spec, facts)
    findings += check_conflicts(spec, facts, topology_id)
    findings += check_ports(spec)
    findings += check_permissions(spec, facts)
    findings += check_secret_references(spec.namespace, render_objects(spec))
    findings += check_rollout_availability(
        spec,
        facts,
        rendered=render_objects(spec),
        deployed=deployed,
        deployed_rendered=render_objects(deployed) if deployed is not None else [],
    )
    return sorted(findings, key=lambda f: (f.level != ERROR, f.field, f.code))


UNANSWERED = {
    "slo.ttft_ms": ("the p95 time-to-first-token target is not set", "set slo.ttft_ms (ms), e.g. 1000"),
    "slo.tbt_ms": ("the p95 time-between-tokens target is not set", "set slo.tbt_ms (ms), e.g. 50"),
    "rebalancing.prefill": ("the prefill replica bounds are not set", "set rebalancing.prefill min and max"),
    "rebalancing.decode": ("the decode replica bounds are not set", "set rebalancing.decode min and max"),
}


def check_unanswered(spec: TopologySpec) -> list[Finding]:
    """Values an import left unset for the operator to answer: the pods run, but SLO alerts and the
    planner wait for them."""
    return [
        Finding(
            WARNING,
            "value_unset",
            path,
            f"{UNANSWERED[path][0]}; SLO alerts and the rebalancing planner wait for it",
            f"{UNANSWERED[path][1]} in the editor",
        )
        for path in spec.unanswered()
    ]


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.blocking for f in findings)


def check_backend(spec: TopologySpec, facts: ClusterFacts) -> list[Finding]:
    if spec.backend != "kthena":
        return []
    missing = [crd for crd in kthena.REQUIRED_CRDS if crd not in facts.crds]
    out: list[Finding] = []
    if missing:
        out.append(
            Finding(
                ERROR,
                "crds_missing",
                "backend",
                f"Kthena is not installed on this cluster: missing CRD {', '.join(missing)}",
                "install Kthena (helm install kthena …) or choose backend 'deployments' (plain Deployments)",
            )
        )
    if spec.engine == "mindie":
        out.append(
            Finding(
                WARNING,
                "router_engine_generic",
                "engine",
                "Kthena's router knows vLLM and SGLang only; MindIE is routed as an OpenAI-compatible "
                "vLLM server, so load-aware scoring from engine metrics is unavailable",
                "accept it, or use backend 'deployments' with Tandem's router",
            )
        )
    return out


_SVC_HOST = re.compile(
    r"^(?P<name>[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.(?P<ns>[a-z0-9]([-a-z0-9]*[a-z0-9])?))?"
    r"(\.svc(\.cluster\.local)?)?$"
)


def master_service(spec: TopologySpec) -> tuple[str, str, int] | None:
    """(namespace, service, port) named by ``connector.master_address``; None for an IP or external host."""
    host, _, port = spec.connector.master_address.rpartition(":")
    match = _SVC_HOST.match(host)
    if not match or not (port.isascii() and port.isdigit()):
        return None
    return match.group("ns") or spec.namespace, match.group("name"), int(port)


def check_connector_backend(spec: TopologySpec, facts: ClusterFacts) -> list[Finding]:
    if spec.connector.type != "mooncake-store":
        return []
    target = master_service(spec)
    if target is None:
        return [
            Finding(
                WARNING,
                "connector_backend_unverified",
                "connector.master_address",
                f"cannot check the Mooncake master at {spec.connector.master_address}: "
                "it is not a Service name",
                "use the master's Service address (mooncake-master.<namespace>.svc:50051) "
                "so preflight can check it",
            )
        ]
    namespace, name, port = target
    service = next((s for s in facts.services if s.namespace == namespace and s.name == name), None)
    if service is None:
        return [
            Finding(
                ERROR,
                "connector_backend_missing",
                "connector.master_address",
                f"the Mooncake master Service {namespace}/{name} does not exist; "
                "mooncake-store pods would fail to connect and crash-loop",
                f"deploy the Mooncake master (mooncake_master, RPC port {port}) as Service {name} "
                f"in {namespace}, or correct connector.master_address",
            )
        ]
    if service.ports and port not in service.ports:
        offered = ", ".join(str(p) for p in service.ports)
        return [
            Finding(
                ERROR,
                "connector_backend_port",
                "connector.master_address",
                f"Service {namespace}/{name} exposes port {offered}, not {port}",
                f"set connector.master_address to {name}.{namespace}.svc:{service.ports[0]}",
            )
        ]
    return []


def _matches(node: NodeFacts, selector: dict[str, str]) -> bool:
    return all(node.labels.get(k) == v for k, v in selector.items())


def _offered(nodes: Iterable[NodeFacts]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for node in nodes:
        for resource in node.allocatable:
            totals[resource] = totals.get(resource, 0) + node.free(resource)
    return totals


def check_accelerators(spec: TopologySpec, facts: ClusterFacts) -> list[Finding]:
    nodes = [n for n in facts.nodes if n.schedulable]
    if not nodes:
        return [
            Finding(
                ERROR,
                "no_nodes",
                "cluster",
                "the cluster has no ready, schedulable nodes",
                "wait for nodes to join or uncordon them (kubectl uncordon <node>)",
            )
        ]
    # Free capacity per node, counting what this topology's own pods hold as free (they get replaced).
    free: dict[str, dict[str, int]] = {}
    for node in nodes:
        own = facts.own_in_use.get(node.name, {})
        free[node.name] = {r: node.free(r) + own.get(r, 0) for r in node.allocatable}
    out: list[Finding] = []
    roles = [r for r in ("prefill", "decode") if spec.role(r).replicas > 0]
    # Place the biggest pods first (first-fit decreasing), both roles sharing the same nodes.
    for role_name in sorted(roles, key=lambda r: -spec.role(r).accelerator_count):
        role = spec.role(role_name)
        resource, count, path = role.accelerator_resource, role.accelerator_count, f"roles.{role_name}"
        if count == 0:
            continue
        eligible = [n for n in nodes if _matches(n, role.node_selector)]
        if not eligible:
            selector = ", ".join(f"{k}={v}" for k, v in role.node_selector.items())
            out.append(
                Finding(
                    ERROR,
                    "node_selector_unmatched",
                    f"{path}.node_selector",
                    f"no ready node has the labels {selector}",
                    "correct the node selector or label the nodes that should run this role",
                )
            )
            continue
        offering = [n for n in eligible if n.allocatable.get(resource, 0) > 0]
        if not offering:
            offered = _offered(eligible)
            others = ", ".join(f"`{r}` ({offered[r]} free)" for r in sorted(offered)) or "no accelerators"
            out.append(
                Finding(
                    ERROR,
                    "accelerator_resource_unknown",
                    f"{path}.accelerator_resource",
                    f"no node offers `{resource}`; nodes offer {others}",
                    "set accelerator_resource to the name your nodes' device plugin advertises",
                )
            )
            continue
        largest = max(n.allocatable.get(resource, 0) for n in offering)
        if count > largest:
            out.append(
                Finding(
                    ERROR,
                    "accelerators_per_pod",
                    f"{path}.accelerator_count",
                    f"one {role_name} pod needs {count} `{resource}` on a single node; the largest "
                    f"node has {largest}",
                    f"lower accelerator_count (and --tensor-parallel-size) to {largest} or fewer",
                )
            )
            continue
        placed = 0
        for node in sorted(offering, key=lambda n: -free[n.name].get(resource, 0)):
            while placed < role.replicas and free[node.name].get(resource, 0) >= count:
                free[node.name][resource] -= count
                placed += 1
        if placed < role.replicas:
            left = sum(free[n.name].get(resource, 0) for n in offering)
            out.append(
                Finding(
                    ERROR,
                    "accelerators_insufficient",
                    f"{path}.replicas",
                    f"{role_name} needs {role.replicas} pods × {count} `{resource}`; the nodes have "
                    f"room for {placed} more ({left} left free after placing them)",
                    f"lower {role_name} replicas to {placed}, free accelerators, or add nodes",
                )
            )
        used = role.tensor_parallel_size * role.data_parallel_size
        if count > used:
            out.append(
                Finding(
                    WARNING,
                    "accelerators_idle",
                    f"{path}.accelerator_count",
                    f"each {role_name} pod reserves {count} accelerators but tensor × data parallel "
                    f"uses {used}; {count - used} sit idle",
                    f"set accelerator_count to {used} or raise the parallel sizes",
                )
            )
    return out


def check_namespace(spec: TopologySpec, facts: ClusterFacts) -> list[Finding]:
    if facts.namespace_exists:
        return []
    if facts.can_create_namespace:
        return [
            Finding(
                WARNING,
                "namespace_created",
                "namespace",
                f"namespace {spec.namespace} does not exist; the deploy will create it",
                "nothing to do, or pick an existing namespace",
            )
        ]
    return [
        Finding(
            ERROR,
            "namespace_missing",
            "namespace",
            f"namespace {spec.namespace} does not exist and Tandem may not create namespaces",
            f"create it (kubectl create namespace {spec.namespace}) or pick an existing namespace",
        )
    ]


def render_objects(spec: TopologySpec) -> list[dict[str, Any]]:
    """The objects the spec renders (names and kinds do not depend on ids)."""
    from topologies.render import render

    return render(spec, topology_id=0, revision=0)


def rendered_keys(spec: TopologySpec) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every object the spec renders."""
    return [(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in render_objects(spec)]


def check_conflicts(spec: TopologySpec, facts: ClusterFacts, topology_id: int | None) -> list[Finding]:
    out: list[Finding] = []
    wanted = set(rendered_keys(spec))
    for obj in facts.objects:
        if (obj.kind, obj.namespace, obj.name) not in wanted:
            continue
        owner = obj.labels.get(labels.TOPOLOGY)
        if obj.labels.get(labels.MANAGED_BY) != labels.MANAGED_BY_VALUE:
            out.append(
                Finding(
                    ERROR,
                    "object_conflict",
                    "name",
                    f"{obj.kind} {obj.namespace}/{obj.name} already exists and is not managed by "
                    "Tandem; deploying would take it over",
                    "rename the topology or choose another namespace (or remove that object)",
                )
            )
        elif topology_id is None or owner != str(topology_id):
            out.append(
                Finding(
                    ERROR,
                    "object_owned_elsewhere",
                    "name",
                    f"{obj.kind} {obj.namespace}/{obj.name} belongs to another Tandem topology (#{owner})",
                    "rename this topology or choose another namespace",
                )
            )
    return out


def check_ports(spec: TopologySpec) -> list[Finding]:
    out: list[Finding] = []
    paths = {
        "http": "port",
        "kv": "connector.kv_port",
        "bootstrap": "connector.bootstrap_port",
        "nixl": "connector.side_channel_port",
        "link": "connector.link_port",
        "metrics": "port (MindIE's metricsPort: port + 2)",
        "tent-metrics": "connector.transfer_metrics_port",
    }
    seen: set[tuple[str, str]] = set()
    for role in ("prefill", "decode"):
        by_port: dict[int, str] = {}
        for port in engine_render.container_ports(spec, role):
            number, name = port["containerPort"], port["name"]
            if number in by_port:
                first = by_port[number]
                key = (paths[first], paths[name])
                if key in seen:
                    continue
                seen.add(key)
                out.append(
                    Finding(
                        ERROR,
                        "port_collision",
                        paths[name],
                        f"{paths[name]} ({number}) collides with {paths[first]} in the {role} pods",
                        f"give {paths[name]} a port of its own",
                    )
                )
            else:
                by_port[number] = name
    return out


def spec_needs(spec: TopologySpec) -> tuple[Need, ...]:
    """Every permission a deploy of this spec uses (its rendered kinds' rows plus the jobs' rows)."""
    kinds = {(_group_of(o["apiVersion"]), o["kind"]) for o in render_objects(spec)}
    return needs_for_kinds(kinds, kthena=spec.backend == "kthena")


def _group_of(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def check_permissions(spec: TopologySpec, facts: ClusterFacts) -> list[Finding]:
    """Permissions a deploy of this spec needs that the cluster denies Tandem, with the rules to add."""
    missing = [n for n in spec_needs(spec) if n.key in facts.denied]
    if not missing:
        return []
    by_resource: dict[str, list[str]] = {}
    for need in missing:
        where = f"{need.resource}.{need.group}" if need.group else need.resource
        by_resource.setdefault(where, []).append(need.verb)
    listed = "; ".join(f"{' '.join(verbs)} {where}" for where, verbs in by_resource.items())
    whys = sorted({n.why for n in missing})
    return [
        Finding(
            ERROR,
            "permission_denied",
            "backend",
            f"Tandem may not {listed} on this cluster (needed to {'; '.join(whys)}); the deploy would be "
            "refused part-way",
            "add these rules to the ClusterRole bound to Tandem's service account (docker/k8s/rbac.yaml "
            f"has the full role), then run the cluster check again:\n{rule_snippet(missing)}",
        )
    ]
