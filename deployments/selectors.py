"""Reads: deployment lists, one deployment with its steps, orphans, and the topology page's panel."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from controlplane.api.errors import DomainError
from deployments.models import ACTIVE_STATES, Deployment, DeployPolicy
from deployments.rollbacks import rollback_plan
from deployments.rollout import rollout_of
from deployments.serving import model_name_sharing

if TYPE_CHECKING:
    from topologies.models import Topology


def deployment_list() -> QuerySet[Deployment]:
    return Deployment.objects.select_related("revision", "rolled_back_to", "requested_by").order_by(
        "-created", "-id"
    )


def deployment_get(deployment_id: int) -> Deployment:
    return deployment_list().prefetch_related("steps").get(pk=deployment_id)


def active_deployment(topology: Topology) -> Deployment | None:
    return deployment_list().filter(topology=topology, state__in=ACTIVE_STATES).first()


def orphaned_deployments() -> QuerySet[Deployment]:
    """Active jobs whose worker stopped beating, or queued jobs nobody picked up."""
    now = timezone.now()
    stale = now - timedelta(seconds=float(getattr(settings, "DEPLOY_HEARTBEAT_STALE_SECONDS", 60)))
    return Deployment.objects.filter(state__in=ACTIVE_STATES).filter(
        Q(heartbeat__lt=stale) | Q(heartbeat__isnull=True, created__lt=stale)
    )


def deploy_policy(topology: Topology) -> DeployPolicy:
    """The topology's deploy policy (an unsaved default one when none was set)."""
    return DeployPolicy.objects.filter(topology=topology).first() or DeployPolicy(topology=topology)


def pod_template_revisions(topology: Topology) -> dict[tuple[str, str], int]:
    """(role, template hash) → the revision whose template it is: the deployed one, else the desired one.

    Pods carry no revision label (a scale must not restart the other role); the hash says which
    template a pod runs, and one template may serve several revisions.
    """
    from deployments.plan import pod_sets

    found: dict[tuple[str, str], int] = {}
    for revision in (topology.current_revision, topology.deployed_revision):  # deployed wins
        if revision is not None:
            for pod_set in pod_sets(revision.manifests):
                found[(pod_set.role, pod_set.template_hash)] = revision.number
    return found


def topology_pods(topology: Topology) -> list[dict[str, Any]]:
    """Pods of the topology by role, read live from the cluster (empty when unreachable, or when it does not
    answer within ``PREFLIGHT_PAGE_TIMEOUT_SECONDS``: the page never waits out the Kubernetes timeouts)."""
    import kube
    from clusters.selectors import cluster_connection
    from kube.labels import ROLE, TEMPLATE_HASH
    from topologies.preflight_cache import page_timeout_seconds, run_bounded
    from topologies.selectors import pod_selector

    conn = cluster_connection(topology.cluster)
    namespace, selector = topology.namespace, pod_selector(topology)
    try:
        done, listed = run_bounded(
            f"pods:{conn.cluster_id}:{conn.server}:{namespace}:{selector}",
            lambda: kube.list_pods(conn, namespace, selector),
            page_timeout_seconds(),
        )
    except kube.KubeError:
        return []
    pods = listed if done and listed is not None else []
    revisions = pod_template_revisions(topology)
    deployed = topology.deployed_revision.number if topology.deployed_revision is not None else None
    rows = []
    for pod in pods:
        role = pod.labels.get(ROLE) or pod.labels.get("modelserving.volcano.sh/role") or "other"
        template = pod.labels.get(TEMPLATE_HASH, "")
        number = revisions.get((role, template))
        if pod.deletion_pending:
            state = "terminating"
        elif pod.ready:
            state = "ready"
        elif pod.reason:
            state = pod.reason
        else:
            state = "starting" if pod.phase == "Running" else pod.phase
        rows.append(
            {
                "name": pod.name,
                "role": role,
                "revision": "older"
                if number is None
                else f"{number}{'' if number == deployed else ' (rolling out)'}",
                "template": template,
                "current": number is not None and number == deployed,
                "state": state,
                "state_class": state.lower().replace(" ", "-"),
                "restarts": pod.restarts,
                "node": pod.node,
                "ip": pod.ip,
            }
        )
    order = {"prefill": 0, "decode": 1}
    return sorted(rows, key=lambda r: (order.get(str(r["role"]), 2), str(r["name"])))


def preflight_blocking(topology: Topology) -> list[Any]:
    """Preflight's blocking findings for the desired revision (the Deploy button waits for none). Cached
    facts or a bounded read (``topologies.preflight_cache``): the page never waits on a silent cluster."""
    from topologies.services import topology_preflight_bounded

    if topology.current_revision is None:
        return []
    return [f for f in topology_preflight_bounded(topology=topology) if f.blocking]


# Preflight at request time cannot settle an unreachable cluster (it may answer a moment later, and the
# deploy job runs preflight again before applying anything): only findings it could verify refuse the deploy.
UNVERIFIED_AT_REQUEST = frozenset({"cluster_unreachable"})


def deploy_preflight_refusal(topology: Topology, revision: Any = None) -> DomainError | None:
    """The deploy API's answer when preflight blocks the revision: 409 naming each blocking finding (its
    spec field, message and fix) and ``override_preflight``, the way to deploy anyway. None: go ahead."""
    from topologies.services import topology_preflight_bounded

    chosen = revision or topology.current_revision
    if chosen is None:
        return None
    findings = [
        f
        for f in topology_preflight_bounded(topology=topology, revision=chosen)
        if f.blocking and f.code not in UNVERIFIED_AT_REQUEST
    ]
    if not findings:
        return None
    fields: dict[str, list[str]] = {}
    for finding in findings:
        fields.setdefault(finding.field or "cluster", []).append(f"{finding.message}; fix: {finding.fix}")
    fields["override_preflight"] = ["or deploy anyway: give the reason here (recorded in the audit log)"]
    listed = "; ".join(f"{f.code} ({f.field or 'cluster'}): {f.message}" for f in findings)
    return DomainError(
        f"preflight blocks revision {chosen.number}: {listed}. Fix the spec, or deploy anyway with "
        "override_preflight giving the reason",
        code="preflight_blocked",
        fields=fields,
        status_code=409,
    )


def topology_panel_context(topology: Topology, request: Any = None) -> dict[str, Any]:
    """Context for the deployments panel on the topology detail page."""
    deployments = list(deployment_list().filter(topology=topology).prefetch_related("steps")[:10])
    latest = deployments[0] if deployments else None
    latest_steps = list(latest.steps.all()) if latest is not None else []
    revisions = list(topology.revisions.order_by("-number").values_list("number", flat=True)[:50])
    user = getattr(request, "user", None)
    can_operate = bool(
        user is not None and getattr(user, "is_authenticated", False) and user.has_role("operator")
    )
    spec_roles = (topology.spec or {}).get("roles", {})
    active = latest if latest is not None and latest.is_active else None
    plan = rollback_plan(topology)
    return {
        "rollout": rollout_of(topology, next((d for d in deployments if d.kind != "delete"), None)),
        "rollback": plan,
        "rollback_good": [c for c in plan.candidates if c.known_good],
        "rollback_untested": [c for c in plan.candidates if not c.known_good],
        "blocking": preflight_blocking(topology) if can_operate and active is None else [],
        "sharing": model_name_sharing(topology),
        "topology": topology,
        "deployments": deployments,
        "latest": latest,
        "latest_message": latest_steps[-1].message if latest_steps else "",
        "active": active,
        "revisions": revisions,
        "pods": topology_pods(topology),
        "roles": {name: (spec_roles.get(name) or {}).get("replicas") for name in ("prefill", "decode")},
        "drift": topology.drift_detail or {},
        "can_deploy": can_operate,
        "policy": deploy_policy(topology),
        "policy_default": DeployPolicy(),
    }
