"""A kept trace is linked to the first gateway record written for it (grouped by trace id, so that
PostgreSQL reads the trace id's index: ordered by `created`, it walked the `created` index through every
record for a trace whose record was not written yet, minutes a batch on the fault bench's database
without fresh statistics)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.models import GatewayRequest
from traces.models import Trace
from traces.services import traces_link_records

pytestmark = pytest.mark.django_db


def _record(trace_id: str, created: datetime) -> GatewayRequest:
    return GatewayRequest(
        created=created,
        model="m",
        endpoint="chat/completions",
        backend="fallback",
        status=200,
        latency_ms=5.0,
        trace_id=trace_id,
    )


def _trace(trace_id: str, created: datetime) -> Trace:
    return Trace.objects.create(
        trace_id=trace_id,
        created=created,
        gateway_span_id="00f067aa0ba902b7",
        kept="failed",
        model="m",
        endpoint="chat/completions",
        backend="fallback",
        status=200,
        latency_ms=5.0,
    )


def test_a_trace_is_linked_to_the_first_record_written_for_it():
    now = datetime.now(UTC)
    first, later = GatewayRequest.objects.bulk_create(
        [_record("a" * 32, now - timedelta(seconds=2)), _record("a" * 32, now)]
    )
    waiting = _trace("b" * 32, now)  # its record is not written yet
    linked = _trace("a" * 32, now)
    assert traces_link_records() == 2  # both rows updated; one found no record
    linked.refresh_from_db()
    waiting.refresh_from_db()
    assert linked.gateway_request_id == first.pk != later.pk
    assert waiting.gateway_request_id is None
