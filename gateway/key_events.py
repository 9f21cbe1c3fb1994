"""What a key's use sets off that the answer does not wait for: a refused key audited, budget alerts
enqueued; both run in the background on the gateway's event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async

from keys import tokens
from keys.hotpath import KeyRefused


def record_auth_failure(refused: KeyRefused, *, source_ip: str | None, path: str, token: str) -> None:
    """Audit a refused key in the background; the answer does not wait for it."""
    if refused.status not in (401, 403):
        return
    from keys.accounting import key_auth_failure_record

    prefix = token.strip()[: tokens.DISPLAY_PREFIX_LENGTH] if token.strip().startswith(tokens.PREFIX) else ""
    call = sync_to_async(key_auth_failure_record, thread_sensitive=False)
    task = asyncio.get_running_loop().create_task(
        call(
            code=refused.code,
            source_ip=source_ip,
            path=path,
            display_prefix=prefix,
            key_id=refused.record.key_id if refused.record else None,
        )
    )
    _background.add(task)
    task.add_done_callback(_background.discard)


def queue_budget_alerts(key_id: str, crossed: tuple[str, ...]) -> None:
    from keys.tasks import key_budget_alert

    def enqueue() -> None:
        for label in crossed:
            key_budget_alert.delay(key_id, label)

    task = asyncio.get_running_loop().create_task(sync_to_async(enqueue, thread_sensitive=False)())
    _background.add(task)
    task.add_done_callback(_background.discard)


_background: set[asyncio.Task[Any]] = set()
