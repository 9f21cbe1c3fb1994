"""Labels Tandem puts on every object (and pod template) it renders, so anything can find its parts.

Objects carry the topology and the revision they were applied from. Pod templates carry the topology,
the role and a content hash of that role's template, never the revision: a revision that leaves a
role's template alone (a scale of the other role) must not replace that role's pods.
"""

from __future__ import annotations

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "tandem"
TOPOLOGY = "tandem.io/topology"  # topology id
REVISION = "tandem.io/revision"  # revision number
ROLE = "tandem.io/role"  # prefill | decode | router
TEMPLATE_HASH = "tandem.io/template-hash"  # content hash of the role's pod template
# The role a pod serves now, which the P/D router selects by (Kthena's pdGroup labels). Pods start with
# their template's role; an in-place role switch patches only this label on the running pod (first to
# NOT_SERVING to stop routing, then to the new role), never ROLE or the owner's labels, so the
# orchestrator still counts the pod in its template's role and a replaced pod comes back with that role.
SERVING_ROLE = "tandem.io/serving-role"  # prefill | decode | none
NOT_SERVING = "none"
# On a pod the planner took out of routing ahead of a move it staged (value "planner"); any other relabel
# removes it. A pod out of routing without it (a failed switch left it so) is never routed by a sweep.
STAGED = "tandem.io/staged"
STAGED_BY_PLANNER = "planner"
FIELD_MANAGER = "tandem"

# Labels Kthena's ModelServing controller puts on the pods it creates.
KTHENA_NAME = "modelserving.volcano.sh/name"
KTHENA_GROUP = "modelserving.volcano.sh/group-name"
KTHENA_ROLE = "modelserving.volcano.sh/role"
KTHENA_ROLE_ID = "modelserving.volcano.sh/role-id"
KTHENA_ENTRY = "modelserving.volcano.sh/entry"


def topology_labels(topology_id: int, revision: int) -> dict[str, str]:
    return {MANAGED_BY: MANAGED_BY_VALUE, TOPOLOGY: str(topology_id), REVISION: str(revision)}


def pod_template_labels(topology_id: int, role: str) -> dict[str, str]:
    """Labels of a role's pod template, before the renderer adds TEMPLATE_HASH."""
    out = {MANAGED_BY: MANAGED_BY_VALUE, TOPOLOGY: str(topology_id), ROLE: role}
    if role in ("prefill", "decode"):
        out[SERVING_ROLE] = role
    return out


def serving_role(pod_labels: dict[str, str]) -> str:
    """The role a pod serves now: its serving-role label, else (pods rendered before it) its role."""
    return pod_labels.get(SERVING_ROLE) or pod_labels.get(ROLE) or pod_labels.get(KTHENA_ROLE) or ""


def topology_selector(topology_id: int) -> str:
    return f"{MANAGED_BY}={MANAGED_BY_VALUE},{TOPOLOGY}={topology_id}"
