"""The real path: a task enqueued on commit runs in a Celery worker process, and its group_send
reaches a browser-like websocket client connected to a uvicorn process. Redis is the broker and
the channel layer; nothing is mocked."""

from __future__ import annotations

import json
import time

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from websockets.sync.client import connect

from controlplane.tasks import heartbeat
from tests.support import celery_worker, subprocess_env, uvicorn_server

pytestmark = pytest.mark.django_db(transaction=True)


def test_task_enqueued_on_commit_reaches_a_websocket_through_a_real_worker(viewer):
    client = Client()
    client.force_login(viewer)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    env = subprocess_env()
    with uvicorn_server(env) as base, celery_worker(env) as worker:
        ws_url = base.replace("http://", "ws://") + "/ws/system/"
        with connect(
            ws_url, additional_headers={"Cookie": cookie, "Origin": base}, open_timeout=10
        ) as socket:
            started = timezone.now()
            with transaction.atomic():
                heartbeat.delay_on_commit()
                sent_at = time.monotonic()
            deadline = time.monotonic() + 30
            received = None
            while time.monotonic() < deadline:
                assert worker.poll() is None, "the Celery worker exited"
                try:
                    message = json.loads(socket.recv(timeout=1))
                except TimeoutError:
                    continue
                if message.get("kind") == "heartbeat" and message["time"] >= started.isoformat():
                    received = message
                    break
            assert received is not None, "no heartbeat reached the websocket within 30 s"
            print(f"enqueue -> websocket: {time.monotonic() - sent_at:.3f} s (includes worker start-up)")


def test_beat_schedules_the_heartbeat_and_every_scheduled_task_is_registered(settings):
    from controlplane.celery import app

    app.loader.import_default_modules()
    entry = settings.CELERY_BEAT_SCHEDULE["controlplane-heartbeat"]
    assert entry["schedule"] == settings.HEARTBEAT_INTERVAL_SECONDS
    for name, scheduled in settings.CELERY_BEAT_SCHEDULE.items():
        assert scheduled["task"] in app.tasks, f"beat entry {name} names an unknown task {scheduled['task']}"
