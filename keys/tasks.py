from __future__ import annotations

from celery import shared_task

from keys import accounting


@shared_task(ignore_result=True, acks_late=True)
def key_budget_alert(key_id: str, crossed: str) -> None:
    accounting.key_budget_alert_record(key_id=key_id, crossed=crossed)


@shared_task(ignore_result=True)
def rollup_key_usage() -> None:
    accounting.key_usage_rollup()
