"""Labels Tandem puts on every object (and pod template) it renders, so anything can find its parts."""

from __future__ import annotations

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "tandem"
TOPOLOGY = "tandem.io/topology"  # topology id
REVISION = "tandem.io/revision"  # revision number
ROLE = "tandem.io/role"  # prefill | decode | router
FIELD_MANAGER = "tandem"

# Labels Kthena's ModelServing controller puts on the pods it creates.
KTHENA_NAME = "modelserving.volcano.sh/name"
KTHENA_GROUP = "modelserving.volcano.sh/group-name"
KTHENA_ROLE = "modelserving.volcano.sh/role"
KTHENA_ROLE_ID = "modelserving.volcano.sh/role-id"
KTHENA_ENTRY = "modelserving.volcano.sh/entry"


def topology_labels(topology_id: int, revision: int) -> dict[str, str]:
    return {MANAGED_BY: MANAGED_BY_VALUE, TOPOLOGY: str(topology_id), REVISION: str(revision)}


def topology_selector(topology_id: int) -> str:
    return f"{MANAGED_BY}={MANAGED_BY_VALUE},{TOPOLOGY}={topology_id}"
