"""Reads for "who else sets these replicas": a topology's workloads with their managedFields, and the
autoscalers of their namespace (autoscaling/v2 HPAs, KEDA ScaledObjects, Kthena AutoscalingPolicies); and the
one write Tandem offers instead of fighting Kthena's autoscaler: its ratio bounds into the policy's
``disaggregatedTarget.ratioConstraint``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kube.client import ClusterConnection
from kube.errors import KubeForbidden, KubeNotInstalled
from kube.resources import get_object, list_objects, update_object

HPA_API = "autoscaling/v2"
KEDA_API = "keda.sh/v1alpha1"
KTHENA_WORKLOAD_API = "workload.serving.volcano.sh/v1alpha1"
AUTOSCALERS = (
    (HPA_API, "HorizontalPodAutoscaler"),
    (KEDA_API, "ScaledObject"),
    (KTHENA_WORKLOAD_API, "AutoscalingPolicy"),
)


@dataclass(frozen=True)
class OwnerReadout:
    workloads: dict[tuple[str, str, str], dict[str, Any] | None]  # (apiVersion, kind, name) → live or None
    autoscalers: list[dict[str, Any]]
    # kinds that could not be listed for lack of permission (a kind the cluster does not serve is skipped:
    # nothing of it can target the topology)
    forbidden: list[str] = field(default_factory=list)


def replica_owners(
    conn: ClusterConnection, namespace: str, workloads: list[tuple[str, str, str]]
) -> OwnerReadout:
    """The live workloads (None when absent) and every autoscaler in ``namespace``. Connection and API errors
    other than a missing CRD or a 403 on an autoscaler kind raise KubeError."""
    live = {key: get_object(conn, key[0], key[1], namespace, key[2]) for key in workloads}
    found: list[dict[str, Any]] = []
    forbidden: list[str] = []
    for api_version, kind in AUTOSCALERS:
        try:
            found.extend(list_objects(conn, api_version, kind, namespace))
        except KubeNotInstalled:
            continue
        except KubeForbidden:
            forbidden.append(f"{kind} ({api_version})")
    return OwnerReadout(workloads=live, autoscalers=found, forbidden=forbidden)


def ratio_constraint_set(
    conn: ClusterConnection,
    namespace: str,
    policy: str,
    *,
    numerator: str,
    denominator: str,
    min_ratio: str,
    max_ratio: str,
) -> dict[str, Any]:
    """Write ``spec.disaggregatedTarget.ratioConstraint`` of a Kthena AutoscalingPolicy (read, modify,
    write)."""

    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        target = obj.setdefault("spec", {}).setdefault("disaggregatedTarget", {})
        target["ratioConstraint"] = {
            "numeratorRole": numerator,
            "denominatorRole": denominator,
            "minRatio": min_ratio,
            "maxRatio": max_ratio,
        }
        return obj

    return update_object(conn, KTHENA_WORKLOAD_API, "AutoscalingPolicy", namespace, policy, mutate)
