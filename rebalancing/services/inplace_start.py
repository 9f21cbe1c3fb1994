"""Writes: starting in-place role switches, for one instance (``rebalance_switch_start`` calls it once its
refusals are checked) or for a ratio change that keeps the number of instances (``rebalance_ratio_start``
on an engine that switches in place). Either way a Rebalance is created, the plan logged and audited, and
the run enqueued; ``rebalancing.services.inplace`` carries it out."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from audit.services import audit_record
from controlplane.api.errors import DomainError
from rebalancing.models import Rebalance, RebalanceKind
from rebalancing.moves import plan_switches
from rebalancing.services.engine_steps import PLAN
from rebalancing.services.steps import create
from rebalancing.services.steps import log_step as _log
from rebalancing.switching import role_pods, serving_roles


def switch_in_place_start(
    *,
    topology: Any,
    instance: str,
    source_role: str,
    target_role: str,
    target: tuple[int, int],
    path_reason: str,
    drain_timeout_seconds: float | None,
    actor: Any,
    source_ip: str | None,
) -> Rebalance:
    drain = float(drain_timeout_seconds or settings.REBALANCE_DRAIN_TIMEOUT_SECONDS)
    rebalance = create(
        topology=topology,
        kind=RebalanceKind.SWITCH_IN_PLACE,
        target=target,
        moves=[],
        actor=actor,
        params={
            "instance": instance,
            "target_role": target_role,
            "source_role": source_role,
            "path": "in_place",
            "why": path_reason,
            "drain_timeout_seconds": drain,
        },
    )
    _log(
        rebalance,
        f"Switch {instance} {source_role} → {target_role}, in place ({path_reason}): stop routing to it, "
        f"drain (at most {drain:.0f} s), {PLAN.get(topology.engine, PLAN['mindie'])}, verify, resume routing",
    )
    audit_record(
        action="rebalancing.switch_role",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={
            "rebalance": rebalance.pk,
            "instance": instance,
            "target_role": target_role,
            "path": "in_place",
            "text": f"{instance} → {target_role} (in place) by {rebalance.requested_by_label}",
        },
    )
    from rebalancing.tasks import run_in_place_switch

    run_in_place_switch.apply_async_on_commit((rebalance.pk,))
    return rebalance


def ratio_in_place_start(
    *,
    topology: Any,
    current: tuple[int, int],
    target: tuple[int, int],
    kind: str,
    path_reason: str,
    actor: Any,
    source_ip: str | None,
    pods: list[Any] | None = None,
    staged: dict[str, str] | None = None,
) -> Rebalance:
    """A ratio change that keeps the number of instances, on an engine that switches in place: one
    in-place switch per instance that changes role, one at a time (no instance added or removed).
    ``pods``: the topology's pods as ``role_pods`` listed them (listed here when not given); ``staged``:
    pods the planner took out of routing ahead of this move, by the role they served (switched first)."""
    serving = serving_roles(pods if pods is not None else role_pods(topology), staged)
    try:
        switches = plan_switches(serving, *target, first=tuple(staged or ()))
    except ValueError as error:
        raise DomainError(
            f"cannot set {target[0]}P/{target[1]}D in place: {error}",
            code="ratio_refused",
            fields={"prefill": [f"{error}; wait until every instance is Ready and routed, then try again"]},
        ) from None
    drain = float(settings.REBALANCE_DRAIN_TIMEOUT_SECONDS)
    rebalance = create(
        topology=topology,
        kind=kind,
        target=target,
        moves=[
            {"role": s["target_role"], "replicas": n, "instance": s["instance"]}
            for n, s in enumerate(
                switches,
                start=(current[0] if switches[0]["target_role"] == "prefill" else current[1]) + 1,
            )
        ],
        actor=actor,
        params={"path": "in_place", "why": path_reason, "switches": switches, "drain_timeout_seconds": drain},
    )
    names = ", ".join(f"{s['instance']} → {s['target_role']}" for s in switches)
    _log(
        rebalance,
        f"Planned {current[0]}P/{current[1]}D → {target[0]}P/{target[1]}D as {len(switches)} in-place "
        f"switch{'es' if len(switches) > 1 else ''} ({path_reason}), one at a time: {names}; each stops "
        f"routing to its instance, drains it (at most {drain:.0f} s), "
        f"{PLAN.get(topology.engine, PLAN['mindie'])}, verifies and resumes routing",
    )
    audit_record(
        action="rebalancing.ratio_start",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={
            "rebalance": rebalance.pk,
            "prefill": target[0],
            "decode": target[1],
            "path": "in_place",
            "switches": switches,
            "text": f"rebalance to {target[0]}P/{target[1]}D (in place) started by "
            f"{rebalance.requested_by_label}",
        },
    )
    from rebalancing.tasks import run_in_place_switch

    run_in_place_switch.apply_async_on_commit((rebalance.pk,))
    return rebalance
