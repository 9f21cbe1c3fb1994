"""Thin Celery tasks: the planner's interval tick, moving a rebalance on, and running an in-place switch."""

from __future__ import annotations

from celery import shared_task
from celery.app.task import Task


@shared_task(name="rebalancing.tasks.planner_tick_all", ignore_result=True)
def planner_tick_all() -> int:
    """Tick every planner that is on (and advance running rebalances); returns decisions stored."""
    from rebalancing.services import planner_tick_all as tick

    return tick()


@shared_task(bind=True, name="rebalancing.tasks.advance_rebalance", ignore_result=True, max_retries=None)
def advance_rebalance(self: Task, rebalance_id: int) -> str:
    """Move one rebalance on; while its scale job runs, look again in a second. Idempotent."""
    from rebalancing.models import Rebalance
    from rebalancing.services import rebalance_advance

    rebalance = Rebalance.objects.filter(pk=rebalance_id).first()
    if rebalance is None or not rebalance.is_active:
        return "done"
    before = (rebalance.next_move, rebalance.deployment_id)
    after = rebalance_advance(rebalance=rebalance)
    if after.is_active and (after.next_move, after.deployment_id) == before:
        raise self.retry(countdown=1)
    return after.state


@shared_task(name="rebalancing.tasks.run_in_place_switch", ignore_result=True)
def run_in_place_switch(rebalance_id: int) -> str:
    """Carry out an in-place role switch (one worker claims it; a second delivery is a no-op)."""
    from rebalancing.services.inplace import rebalance_in_place_run

    return rebalance_in_place_run(rebalance_id=rebalance_id)
