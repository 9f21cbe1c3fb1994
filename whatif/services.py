"""Writes of what-if runs: start (bounded per topology and per user), run (the Celery task's body),
cancel, and apply a recommended split through the planner's own ratio path or a new revision."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from controlplane.broadcast import broadcast_on_commit, topology_group
from whatif import plan, simulation
from whatif.models import ACTIVE_STATES, WhatIfRun, WhatIfState

log = logging.getLogger(__name__)

TOPOLOGY_LIMIT = 1  # queued or running runs per topology (also a partial unique constraint)
USER_LIMIT = 2  # queued or running runs per person, over all topologies
STALE_RUNNING = timedelta(minutes=15)  # a run "running" this long lost its worker: a new delivery takes it


class TooMany(DomainError):
    status_code = 429


def _label(user: Any) -> str:
    return str(user.get_username()) if user is not None and user.is_authenticated else "system"


def _event(run: WhatIfRun) -> None:
    broadcast_on_commit(
        topology_group(run.topology_id),
        {
            "kind": "whatif",
            "id": run.pk,
            "topology": run.topology_id,
            "state": run.state,
            "progress": round(run.progress, 3),
            "step": run.step,
        },
    )


def allowed_splits(topology: Any) -> list[tuple[int, int]]:
    from rebalancing.selectors import topology_limits

    return simulation.splits_for(topology_limits(topology))


@transaction.atomic
def whatif_run_create(
    *,
    topology: Any,
    user: Any,
    window_seconds: int,
    end: float | None = None,
    splits: list[tuple[int, int]] | None = None,
    trace: dict[str, Any] | None = None,
    source_ip: str | None = None,
) -> WhatIfRun:
    """Queue a what-if run; 400 with field errors for a bad window or split, 409 while the topology has a
    run queued or running, 429 while the person has ``USER_LIMIT`` of them. ``trace`` (an imported trace,
    ``WhatIfRun.trace``'s shape) is replayed instead of the window's traffic."""
    from django.contrib.auth import get_user_model

    from topologies.models import Topology

    now = time.time()
    end = now if end is None else float(end)
    fields = simulation.window_fields(window_seconds=window_seconds, end=end, now=now)
    allowed = allowed_splits(topology)
    chosen = [(int(p), int(d)) for p, d in splits] if splits else allowed
    fields.update(simulation.splits_fields(chosen, allowed))
    if fields:
        first = next(iter(fields))
        raise DomainError(f"{first}: {fields[first][0]}", code="invalid", fields=fields)
    locked = Topology.objects.select_for_update().get(pk=topology.pk)
    _reap(WhatIfRun.objects.filter(topology=locked))
    _reap(WhatIfRun.objects.filter(requested_by=user))
    busy = WhatIfRun.objects.filter(topology=locked, state__in=ACTIVE_STATES).first()
    if busy is not None:
        raise Conflict(
            f"what-if #{busy.pk} of this topology is {busy.state} (at most {TOPOLOGY_LIMIT} at a time); "
            "wait for it or cancel it",
            code="whatif_busy",
            fields={"topology": [f"what-if #{busy.pk} is {busy.state}"]},
        )
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    mine = list(WhatIfRun.objects.filter(requested_by=user, state__in=ACTIVE_STATES).order_by("pk"))
    if len(mine) >= USER_LIMIT:
        names = ", ".join(f"#{r.pk}" for r in mine)
        raise TooMany(
            f"you have {len(mine)} what-if runs queued or running ({names}; at most {USER_LIMIT}); "
            "wait for one to finish or cancel it",
            code="whatif_limit",
        )
    try:
        with transaction.atomic():
            run = WhatIfRun.objects.create(
                topology=locked,
                window_start=end - window_seconds,
                window_end=end,
                splits=[list(s) for s in chosen],
                trace=trace,
                requested_by=user,
                requested_by_label=_label(user),
                step="queued",
            )
    except IntegrityError:
        raise Conflict(
            "another what-if of this topology started at the same moment", code="whatif_busy"
        ) from None
    audit_record(
        action="whatif.start",
        actor=user,
        target=locked,
        source_ip=source_ip,
        detail={
            "run": run.pk,
            "window_seconds": window_seconds,
            "splits": run.splits,
            **({"trace": {k: trace[k] for k in ("file_format", "name", "total")}} if trace else {}),
        },
    )
    _event(run)
    from whatif.tasks import run_whatif

    run_whatif.delay_on_commit(run.pk)
    return run


@transaction.atomic
def whatif_run_cancel(*, run: WhatIfRun, actor: Any, source_ip: str | None = None) -> WhatIfRun:
    """Cancel a queued run at once; a running one stops before its next split."""
    locked = WhatIfRun.objects.select_for_update().get(pk=run.pk)
    if not locked.active:
        raise Conflict(
            f"what-if #{locked.pk} already {locked.state}; only a queued or running run can be cancelled",
            code="whatif_finished",
        )
    if locked.state == WhatIfState.QUEUED:
        _finish(locked, WhatIfState.CANCELLED, step=f"cancelled by {_label(actor)} before it started")
    else:
        locked.cancel_requested = True
        locked.step = f"cancelling (asked by {_label(actor)}); stops before the next split"
        locked.save(update_fields=["cancel_requested", "step"])
        _event(locked)
    audit_record(
        action="whatif.cancel",
        actor=actor,
        target=locked.topology,
        source_ip=source_ip,
        detail={"run": locked.pk},
    )
    return locked


def _reap(runs: Any) -> None:
    """Fail runs whose job was lost (a worker gone for good, a message dropped): queued or running for longer
    than ``STALE_RUNNING``, so they no longer hold the limits."""
    stale = timezone.now() - STALE_RUNNING
    for run in (
        runs.select_for_update()
        .filter(state__in=ACTIVE_STATES)
        .filter(
            Q(state=WhatIfState.QUEUED, created_at__lt=stale)
            | Q(state=WhatIfState.RUNNING, started_at__lt=stale)
        )
    ):
        minutes = STALE_RUNNING.total_seconds() // 60
        _finish(
            run,
            WhatIfState.FAILED,
            step="failed",
            error=f"its job was lost (no progress for {minutes:.0f} min)",
        )


def _finish(run: WhatIfRun, state: str, *, step: str, error: str = "") -> None:
    run.state = state
    run.step = step
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["state", "step", "error", "finished_at", "result", "progress"])
    _event(run)


def _claim(run_id: int) -> WhatIfRun | None:
    """Take the run for this worker: a queued one, or a running one whose worker was lost."""
    stale = timezone.now() - STALE_RUNNING
    with transaction.atomic():
        run = WhatIfRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or not (
            run.state == WhatIfState.QUEUED
            or (run.state == WhatIfState.RUNNING and run.started_at is not None and run.started_at < stale)
        ):
            return None
        run.state = WhatIfState.RUNNING
        run.started_at = timezone.now()
        run.step = "loading the recorded traffic"
        run.progress = 0.0
        run.save(update_fields=["state", "started_at", "step", "progress"])
        _event(run)
    return run


def _progress(run: WhatIfRun, *, progress: float, step: str, rows: list[dict[str, Any]]) -> bool:
    """Record progress; False when a cancel was asked for (the run is then finished as cancelled)."""
    with transaction.atomic():
        locked = WhatIfRun.objects.select_for_update().get(pk=run.pk)
        if locked.cancel_requested:
            locked.result = {"splits": rows, "incomplete": True} if rows else None
            done = len(rows)
            _finish(
                locked, WhatIfState.CANCELLED, step=f"cancelled after {done} of {len(locked.splits)} splits"
            )
            return False
        locked.progress, locked.step = progress, step
        locked.save(update_fields=["progress", "step"])
        _event(locked)
    return True


def whatif_run_execute(*, run_id: int) -> None:
    """The job: replay the window split by split, recording progress and noticing a cancel between splits.
    Idempotent: a run already finished, or running on a live worker, is left alone."""
    from rebalancing.selectors import effective_replicas

    run = _claim(run_id)
    if run is None:
        return
    topology = run.topology
    try:
        splits = [(int(p), int(d)) for p, d in run.splits]
        traffic = plan.traffic(
            run=run, splits=splits, ttft_ms=topology.slo_ttft_ms, tbt_ms=topology.slo_tbt_ms
        )
        found = plan.calibration(run=run)
        replay = plan.on_model(traffic, found)
        rows: list[dict[str, Any]] = []
        for index, split in enumerate(splits):
            step = f"simulating {split[0]}P/{split[1]}D ({index + 1} of {len(splits)})"
            if not _progress(run, progress=index / len(splits), step=step, rows=rows):
                return
            rows.append(simulation.replay_split(replay, split))
        if not _progress(run, progress=1.0, step="summarising", rows=rows):
            return
        prefill, decode = effective_replicas(topology)
        current = {"prefill": prefill, "decode": decode}
        result = plan.result(replay=replay, rows=rows, found=found, current=current)
        with transaction.atomic():
            locked = WhatIfRun.objects.select_for_update().get(pk=run.pk)
            locked.result, locked.progress = result, 1.0
            _finish(
                locked, WhatIfState.SUCCEEDED, step=f"done: {len(rows)} splits, {replay.requests} requests"
            )
    except DomainError as error:
        with transaction.atomic():
            locked = WhatIfRun.objects.select_for_update().get(pk=run.pk)
            _finish(locked, WhatIfState.FAILED, step="failed", error=error.message)
    except Exception as error:
        log.exception("what-if #%s failed", run.pk)
        with transaction.atomic():
            locked = WhatIfRun.objects.select_for_update().get(pk=run.pk)
            _finish(locked, WhatIfState.FAILED, step="failed", error=f"the what-if failed: {error}")


def apply_preview(*, run: WhatIfRun, prefill: int, decode: int) -> dict[str, Any]:
    """The diff an apply would make: current prefill/decode → proposed, and the path it takes (pure read)."""
    from rebalancing.selectors import effective_replicas

    rows = (run.result or {}).get("splits") or []
    if run.state != WhatIfState.SUCCEEDED or not rows:
        raise Conflict(
            f"what-if #{run.pk} is {run.state}; only a succeeded run's splits can be applied",
            code="whatif_not_done",
        )
    if not any(r["prefill"] == prefill and r["decode"] == decode for r in rows):
        names = ", ".join(f"{r['prefill']}P/{r['decode']}D" for r in rows)
        raise DomainError(
            f"{prefill}P/{decode}D was not simulated by what-if #{run.pk}",
            code="invalid",
            fields={"prefill": [f"choose one of the simulated splits: {names}"]},
        )
    topology = run.topology
    current_prefill, current_decode = effective_replicas(topology)
    deployed = topology.deployed_revision_id is not None
    return {
        "run": run.pk,
        "current": {"prefill": current_prefill, "decode": current_decode},
        "proposed": {"prefill": prefill, "decode": decode},
        "path": "rebalance" if deployed else "revision",
        "explanation": (
            "the planner's ratio change: one-at-a-time moves (in place where the engine can), steps on the "
            "topology page"
            if deployed
            else "the topology is not deployed: a new revision with these replica counts (deploy it to use "
            "it)"
        ),
    }


@transaction.atomic
def whatif_run_apply(
    *, run: WhatIfRun, prefill: int, decode: int, actor: Any, source_ip: str | None = None
) -> dict[str, Any]:
    """Apply a simulated split: through the planner's ratio path (``rebalance_ratio_start``) on a deployed
    topology, else as a new revision of the topology's spec. Audited as ``whatif.apply``."""
    from rebalancing.models import RebalanceKind
    from rebalancing.services import rebalance_ratio_start
    from topologies.services import topology_update

    preview = apply_preview(run=run, prefill=prefill, decode=decode)
    topology = run.topology
    if preview["path"] == "rebalance":
        rebalance = rebalance_ratio_start(
            topology=topology,
            prefill=prefill,
            decode=decode,
            actor=actor,
            source_ip=source_ip,
            kind=RebalanceKind.RATIO,
        )
        outcome = {**preview, "rebalance": rebalance.pk, "revision": None}
    else:
        spec = dict(topology.spec)
        roles = {name: dict(role) for name, role in spec["roles"].items()}
        roles["prefill"]["replicas"], roles["decode"]["replicas"] = prefill, decode
        updated = topology_update(
            topology=topology,
            spec={**spec, "roles": roles},
            actor=actor,
            source_ip=source_ip,
            message=f"what-if #{run.pk}: {prefill}P/{decode}D",
        )
        number = updated.current_revision.number if updated.current_revision else None
        outcome = {**preview, "rebalance": None, "revision": number}
    audit_record(
        action="whatif.apply",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={
            "run": run.pk,
            "from": preview["current"],
            "to": preview["proposed"],
            "path": preview["path"],
            "rebalance": outcome["rebalance"],
            "revision": outcome["revision"],
        },
    )
    return outcome
