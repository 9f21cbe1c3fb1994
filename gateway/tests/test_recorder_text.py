"""A request record whose text PostgreSQL cannot hold (a NUL or a lone surrogate in a client's model
name) is written with the others, not lost with its whole batch (found by schemathesis on /v1/)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.models import GatewayRequest
from gateway.recorder import RequestRecord, _insert


def record(model: str) -> RequestRecord:
    return RequestRecord(
        created=datetime.now(UTC),
        key_id=None,
        model=model,
        topology_id=None,
        endpoint="/v1/chat/completions",
        backend="",
        status=404,
        error_code="model_not_found",
        stream=False,
        prompt_tokens=0,
        completion_tokens=0,
        ttft_ms=None,
        latency_ms=1.0,
    )


@pytest.mark.django_db
def test_a_model_name_postgresql_cannot_store_does_not_lose_the_batch() -> None:
    _insert([record("served/model"), record("nul\x00model"), record("lone\ud800surrogate")])
    stored = sorted(GatewayRequest.objects.values_list("model", flat=True))
    assert stored == ["lone?surrogate", "nul\ufffdmodel", "served/model"]
