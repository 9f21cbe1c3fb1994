"""Which role-switch path an engine gets, and which instance a scale-down removes (pure where it can be).

What the engines themselves offer (from their own code and docs), and the path each gets:

- MindIE with LLM-DataDist (inferMode "dmi"), on Kthena: **in place**. Its management API assigns a
  running instance its P/D role and its peers: ``POST /v1/role/{prefill|decode}`` with
  ``{"local": {...}, "peers": [...]}`` (MindIE-LLM's ``DmiRole``; its Controller uses it), the peer
  list being the whole set to be linked with (missing peers are unlinked, new ones linked); progress
  and link state are in ``GET /v1/status`` (``roleStatus`` RoleReady/RoleSwitching, ``currentRole``,
  ``linkStatus.peers``). Underneath, LLM-DataDist's ``switch_role`` refuses with ``LLM_EXIST_LINK``
  while links are open, so Tandem closes them first. Tandem routes by its own serving-role label
  (``kube.labels.SERVING_ROLE``), so the switch relabels the pod and leaves the ModelServing alone;
  ``rebalancing.inplace`` has the steps. On the plain-Deployments backend the router selects pods
  by their Deployment's role, so MindIE gets the restart path there.
- vLLM (NIXL, Mooncake, LMCache, P2P NCCL connectors): ``kv_role`` is part of ``--kv-transfer-config``
  and fixed at start-up; no in-place switch exists. Path: restart.
- vllm-ascend with LLM-DataDist: the connector sets ``enable_switch_role`` but never calls
  ``switch_role``, so a served instance cannot change role through vLLM. Path: restart.
- SGLang with the Mooncake transfer backend, on Kthena: **in place**. Started with
  ``--enable-pd-role-switch`` (Tandem renders it, and the bootstrap port on both roles), SGLang serves
  ``POST /pd_role_switch {"new_role"}``: refused (400, ``"success": false``) unless the instance is
  idle, it tears the scheduler's disaggregation side (KV transfer manager, queues, prefix cache) down
  and rebuilds it for the new role; the live role is ``internal_states[0].disaggregation_mode`` of
  ``GET /server_info``. With NIXL, or on the plain backend, SGLang gets the restart path (this
  mirrors ``topologies.render.engine.sglang_role_switch``, which decides what the pods start with).

The restart path, for every engine without an in-place switch: scale the target role up, wait until
the new instance is Ready, then scale the other role down, which drains (terminating pods take no new
requests and finish in-flight ones within the grace period) and removes the instance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SwitchPath:
    name: str  # in_place | restart
    reason: str
    in_place_interface: str  # what the engine offers in place ("" when nothing)


MINDIE_INTERFACE = "POST /v1/role/{role} and GET /v1/status on MindIE's management API"
SGLANG_INTERFACE = "POST /pd_role_switch (idle instances only) and GET /server_info"


def switch_path(engine: str, connector: str, backend: str = "kthena") -> SwitchPath:
    if engine == "mindie" and connector == "llm-datadist":
        if backend == "kthena":
            return SwitchPath(
                "in_place",
                "MindIE reassigns a running instance's role and links through its management API",
                MINDIE_INTERFACE,
            )
        return SwitchPath(
            "restart",
            "the plain backend's router selects pods by their Deployment's role, which a running pod keeps",
            MINDIE_INTERFACE,
        )
    if engine == "sglang":
        if connector == "mooncake" and backend == "kthena":
            return SwitchPath(
                "in_place",
                "SGLang switches an idle instance's role at runtime (--enable-pd-role-switch)",
                SGLANG_INTERFACE,
            )
        return SwitchPath(
            "restart",
            "Tandem starts SGLang able to switch role only with the Mooncake transfer backend on Kthena",
            SGLANG_INTERFACE,
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


def victim_problem(topology: Any, instance: str, role: str, pods: list[Any]) -> str:
    """'' when scaling ``role`` down by one removes ``instance``; otherwise why, naming the one it would.
    ``pods``: the topology's pods as ``role_pods`` listed them."""
    from kube.labels import ROLE

    listed = [
        (p.name, p.created.timestamp() if p.created is not None else 0.0)
        for p in pods
        if p.labels.get(ROLE) == role
    ]
    chosen = removable_instance(topology.backend, listed)
    if chosen is None or chosen == instance:
        return ""
    return (
        f"scaling {role} down removes {chosen}, not {instance} (the orchestrator picks the pod); "
        f"switch {chosen} instead, or use set-the-ratio"
    )


def role_pods(topology: Any) -> list[Any]:
    """The topology's prefill/decode pods that are not being deleted (``kube.PodInfo``); Conflict when
    the cluster cannot be asked."""
    import kube
    from clusters.selectors import cluster_connection
    from controlplane.api.errors import Conflict
    from kube.labels import ROLE, topology_selector

    try:
        pods = kube.list_pods(
            cluster_connection(topology.cluster), topology.namespace, topology_selector(topology.pk)
        )
    except kube.KubeError as error:
        raise Conflict(
            f"the cluster cannot be asked for the topology's pods: {error}", code="cluster_unreachable"
        ) from None
    return [p for p in pods if not p.deletion_pending and p.labels.get(ROLE) in ("prefill", "decode")]


def in_place_problem(pods: list[Any]) -> str:
    """'' when an in-place switch can take any of ``pods`` out of routing; otherwise why not. The router
    selects on the serving-role label, which Tandem renders since it switches in place: a pod deployed
    before carries none, and relabelling it would not stop requests reaching it."""
    from kube.labels import SERVING_ROLE

    missing = sorted(p.name for p in pods if SERVING_ROLE not in p.labels)
    if not missing:
        return ""
    names = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    one = len(missing) == 1
    return (
        f"{names} {'was' if one else 'were'} deployed before Tandem labelled the role each pod serves "
        f"({SERVING_ROLE}), so the router cannot be told to stop sending to {'it' if one else 'them'}: "
        "redeploy the topology, then switch in place"
    )


def serving_roles(pods: list[Any], staged: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """Pod name → (the role it serves now, its template's role). ``staged``: pods the planner took out of
    routing ahead of a move, by the role they served (they count as serving it)."""
    from kube.labels import ROLE, serving_role

    staged = staged or {}
    return {p.name: (staged.get(p.name) or serving_role(p.labels), p.labels[ROLE]) for p in pods}
