"""Project-level periodic work."""

from __future__ import annotations

import socket

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from controlplane import broadcast
from controlplane.consumers import HEARTBEAT_CACHE_KEY


def heartbeat_payload(*, worker: str) -> dict[str, object]:
    return {
        "kind": "heartbeat",
        "time": timezone.now().isoformat(),
        "interval": settings.HEARTBEAT_INTERVAL_SECONDS,
        "worker": worker,
    }


@shared_task(name="controlplane.tasks.heartbeat", ignore_result=True)
def heartbeat() -> None:
    """Beat enqueues this every HEARTBEAT_INTERVAL_SECONDS; pages show "live" while it arrives.

    Idempotent: it only reports the current time. The last beat is kept in the cache so a page
    that connects between beats shows the state at once.
    """
    payload = heartbeat_payload(worker=socket.gethostname())
    cache.set(HEARTBEAT_CACHE_KEY, payload, timeout=settings.HEARTBEAT_INTERVAL_SECONDS * 3)
    broadcast.send_now(broadcast.system_group(), payload)
