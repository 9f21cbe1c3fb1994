"""Budget alerts of inference keys: a request or token quota crossing a threshold through the gateway
raises one alert per window (recorded by a real Celery worker), like the same key on the REST API."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import openai
import pytest

from audit.models import AuditEvent
from gateway.tests.conftest import MODEL
from tests.support import celery_worker, subprocess_env


@pytest.fixture
def worker(gateway):
    with celery_worker(subprocess_env(), log_level="WARNING") as proc:
        yield proc
    assert proc.poll() is None or proc.returncode == 0


def labels(key) -> list[str]:
    events = AuditEvent.objects.filter(action="key.budget_alert", target_id=str(key.pk))
    return sorted(event.detail["label"] for event in events)


def alerts_of(key, wanted: int) -> list[str]:
    """The key's budget alerts once `wanted` arrived (or after 30 s), a second later for any duplicate."""
    deadline = time.monotonic() + 30
    while len(labels(key)) < wanted and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    return labels(key)


def test_request_quota_thresholds_alert_once_through_the_gateway(gateway, inference_key, worker):
    issued = inference_key(name="daily", limits_given={"requests_per_day": 5}, alert_thresholds=[60, 80])
    client = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key=issued.secret, max_retries=0, timeout=30)
    day = datetime.now(UTC).strftime("%Y%m%d")
    for _ in range(5):
        client.models.list()
    with pytest.raises(openai.RateLimitError):
        client.models.list()
    assert datetime.now(UTC).strftime("%Y%m%d") == day, "the run straddled midnight UTC; run again"
    assert alerts_of(issued.key, 2) == [f"requests_per_day:{day}:60", f"requests_per_day:{day}:80"]


def test_token_quota_threshold_alerts_once_through_the_gateway(gateway, inference_key, worker):
    issued = inference_key(name="tokens", limits_given={"tokens_per_day": 60}, alert_thresholds=[10])
    client = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key=issued.secret, max_retries=0, timeout=30)
    day = datetime.now(UTC).strftime("%Y%m%d")
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello"}], max_tokens=8)
    assert alerts_of(issued.key, 1) == [f"tokens_per_day:{day}:10"]
