"""Which role-switch path an engine gets, and which instance a scale-down removes (pure where it can be).

What the engines themselves offer (from their own code and docs):

- vLLM (NIXL, Mooncake, LMCache, P2P NCCL connectors): ``kv_role`` is part of ``--kv-transfer-config``
  and fixed at start-up; no in-place switch exists (an RFC and PR are open upstream). Path: restart.
- vllm-ascend with LLM-DataDist: the connector sets ``enable_switch_role`` but never calls
  ``switch_role``, so a served instance cannot change role through vLLM. Path: restart.
- SGLang: ``--enable-pd-role-switch`` and ``POST /pd_role_switch``, refused unless the instance is
  idle. MindIE: ``POST /v1/role/{role}`` on its management API (used by its Controller to assign
  P/D identity). LLM-DataDist itself: ``switch_role(role, options)``, refused with ``LLM_EXIST_LINK``
  while links are open.

Orchestrators (Kthena's ModelServing, plain Deployments) fix a pod's role by the role (or Deployment)
it belongs to; an instance switched in place would still count as a replica of its old role. So
Tandem carries a switch out, for every engine, as the restart-based path: scale the target role up,
wait until the new instance is Ready, then scale the other role down, which drains (terminating pods
take no new requests and finish in-flight ones within the grace period) and removes the instance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SwitchPath:
    name: str  # restart
    reason: str
    in_place_interface: str  # what the engine offers in place ("" when nothing)


def switch_path(engine: str, connector: str) -> SwitchPath:
    if engine == "sglang":
        return SwitchPath(
            "restart",
            "SGLang offers POST /pd_role_switch, but the orchestrator fixes a pod's role by its replica set",
            "POST /pd_role_switch (idle instances only)",
        )
    if engine == "mindie":
        return SwitchPath(
            "restart",
            "MindIE offers POST /v1/role/{role}, but the orchestrator fixes a pod's role by its replica set",
            "POST /v1/role/{role}",
        )
    if engine == "vllm-ascend" and connector == "llm-datadist":
        return SwitchPath(
            "restart",
            "vllm-ascend's LLM-DataDist connector never calls switch_role; kv_role is fixed at start-up",
            "",
        )
    return SwitchPath("restart", "vLLM sets kv_role at start-up", "")


_ORDINAL = re.compile(r"-(\d+)-0$")


def removable_instance(backend: str, role_pods: list[tuple[str, float]]) -> str | None:
    """The pod a scale-down of its role by one removes: Kthena's ModelServing the highest role index,
    a ReplicaSet the newest pod. ``role_pods``: (pod name, creation unix time)."""
    if not role_pods:
        return None
    if backend == "kthena":

        def ordinal(item: tuple[str, float]) -> int:
            found = _ORDINAL.search(item[0])
            return int(found.group(1)) if found else -1

        return max(role_pods, key=ordinal)[0]
    return max(role_pods, key=lambda item: item[1])[0]


def victim_problem(topology: Any, instance: str, role: str, pods: dict[str, str]) -> str:
    """'' when scaling ``role`` down by one removes ``instance``; otherwise why, naming the one it would."""
    import kube
    from clusters.selectors import cluster_connection
    from kube.labels import ROLE, topology_selector

    listed = kube.list_pods(
        cluster_connection(topology.cluster), topology.namespace, topology_selector(topology.pk)
    )
    role_pods = [
        (p.name, p.created.timestamp() if p.created is not None else 0.0)
        for p in listed
        if p.labels.get(ROLE) == role and not p.deletion_pending
    ]
    chosen = removable_instance(topology.backend, role_pods)
    if chosen is None or chosen == instance:
        return ""
    return (
        f"scaling {role} down removes {chosen}, not {instance} (the orchestrator picks the pod); "
        f"switch {chosen} instead, or use set-the-ratio"
    )
