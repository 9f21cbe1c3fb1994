"""Shared by every kind of rebalance: creating its row, its step log (shown live on the topology page) and
its end."""

from __future__ import annotations

import time
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import audit_record
from controlplane.api.errors import Conflict
from controlplane.broadcast import broadcast_on_commit, topology_group
from rebalancing import selectors
from rebalancing.models import Outcome, PlannerConfig, Rebalance, RebalanceKind, RebalanceState


def actor_label(actor: Any) -> str:
    if actor is not None and getattr(actor, "is_authenticated", False):
        return str(actor.get_username())
    return "planner"


def create(
    *,
    topology: Any,
    kind: str,
    target: tuple[int, int],
    moves: list[dict[str, Any]],
    actor: Any,
    params: dict[str, Any] | None = None,
) -> Rebalance:
    prefill, decode = selectors.effective_replicas(topology)
    try:
        with transaction.atomic():
            rebalance = Rebalance.objects.create(
                topology=topology,
                kind=kind,
                from_prefill=prefill,
                from_decode=decode,
                target_prefill=target[0],
                target_decode=target[1],
                moves=moves,
                params=params or {},
                requested_by_label=actor_label(actor),
            )
    except IntegrityError:
        raise Conflict(
            "another rebalance of this topology started at the same moment", code="rebalance_busy"
        ) from None
    return rebalance


def event(rebalance: Rebalance, message: str) -> None:
    broadcast_on_commit(
        topology_group(rebalance.topology_id),
        {
            "kind": "rebalance",
            "id": rebalance.pk,
            "topology": rebalance.topology_id,
            "state": rebalance.state,
            "target": {"prefill": rebalance.target_prefill, "decode": rebalance.target_decode},
            "message": message,
        },
    )


def log_step(rebalance: Rebalance, message: str) -> None:
    rebalance.log = [*rebalance.log, {"ts": time.time(), "message": message}]
    rebalance.save(update_fields=["log"])
    event(rebalance, message)


def finish(rebalance: Rebalance, *, ok: bool, message: str) -> Rebalance:
    rebalance.state = RebalanceState.SUCCEEDED if ok else RebalanceState.FAILED
    rebalance.finished = timezone.now()
    rebalance.error = "" if ok else message
    rebalance.save(update_fields=["state", "finished", "error"])
    log_step(rebalance, message)
    seconds = (rebalance.finished - rebalance.created).total_seconds()
    for decision in rebalance.decisions.all():
        decision.outcome = Outcome.SUCCEEDED if ok else Outcome.FAILED
        decision.outcome_detail = f"{message} in {seconds:.0f} s"
        decision.save(update_fields=["outcome", "outcome_detail"])
    config = PlannerConfig.objects.filter(topology=rebalance.topology).first()
    if config is not None and rebalance.kind == RebalanceKind.PLANNER:
        state = dict(config.state or {})
        state["last_move_seconds"] = seconds
        config.state = state
        config.save(update_fields=["state"])
    audit_record(
        action="rebalancing.finished",
        target=rebalance.topology,
        detail={
            "rebalance": rebalance.pk,
            "ok": ok,
            "text": f"rebalance {'done' if ok else 'failed'}: {message}",
        },
    )
    return rebalance
