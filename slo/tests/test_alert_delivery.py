"""End to end: counted intervals burn the budget, a page alert fires and reaches a real webhook receiver
(first down: retried with back-off, every attempt recorded), then resolves and delivers "resolved"."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from audit.models import AuditEvent
from slo import delivery, evaluation, services, tasks
from slo.models import AlertEvent, Delivery, DeliveryState, SliMinute, SloAlert
from telemetry.derive import RequestWindow, TopologyOutcomes


def _interval(ok: float, failed: float) -> RequestWindow:
    return RequestWindow(
        ttft=[], itl=[], outcomes=TopologyOutcomes(ok=ok, failed=failed, client=0.0, roles={})
    )


def _count(topology_id: int, when: datetime, ok: float, failed: float) -> None:
    services.sli_record(topology_id=topology_id, ts=when.timestamp(), requests=_interval(ok, failed))


@pytest.mark.django_db
def test_page_alert_fires_delivers_with_retries_and_resolves(topology, operator, receiver, settings) -> None:
    settings.SLO_DELIVERY_BACKOFF_SECONDS = 1.0
    settings.TANDEM_EXTERNAL_URL = "https://tandem.example"
    slo = services.slo_create(topology=topology, sli="success", objective=0.99, actor=operator)
    target = delivery.target_create(name="oncall", url=receiver.url, format="alertmanager", actor=operator)
    now = datetime.now(tz=UTC).replace(microsecond=0)
    start = now - timedelta(minutes=59)
    # an hour of traffic, 20 % failing over the last hour: burn rate 20 over 1 h and 5 m (page ≥ 13.44)
    for minute in range(60):
        _count(topology.pk, start + timedelta(minutes=minute), ok=80, failed=20)
    _count(topology.pk, now, ok=40, failed=10)  # a second interval in the same minute adds up
    assert SliMinute.objects.get(slo=slo, minute=now.replace(second=0)).total == 150

    # all of it within the last hour burns every window: the ticket (3 d/6 h at ≥ 0.93×) fires too
    assert evaluation.slo_evaluate(topology_id=topology.pk, now=now) == [
        "success page fired",
        "success ticket fired",
    ]
    alert = SloAlert.objects.get(slo=slo, severity="page", state="firing")
    assert alert.rule == "page 1 h/5 m" and alert.long_burn == pytest.approx(20.0)
    assert evaluation.slo_evaluate(topology_id=topology.pk, now=now) == []  # stays firing, nothing new
    slo.refresh_from_db()
    assert slo.status["budget_remaining"] == pytest.approx(1 - 20.0)  # overspent 19×
    assert slo.status["colour"] == "bad"

    (firing,) = Delivery.objects.filter(alert=alert)
    assert tasks.deliver(firing.pk) == pytest.approx(1.0)  # nobody listens yet: retry after the back-off
    firing.refresh_from_db()
    assert firing.state == DeliveryState.RETRYING and firing.attempts == 1 and firing.last_status is None
    assert "ConnectionError" in firing.last_error and "s3cr3t" not in firing.last_error
    assert tasks.deliver(firing.pk) is None  # not due yet: left alone
    receiver.start()
    firing.refresh_from_db()
    time.sleep(max(0.0, (firing.next_attempt - datetime.now(tz=UTC)).total_seconds()) + 0.02)
    assert tasks.deliver(firing.pk) is None  # delivered
    firing.refresh_from_db()
    assert (firing.state, firing.attempts, firing.last_status) == (DeliveryState.DELIVERED, 2, 200)
    attempts = list(firing.attempt_rows.values_list("number", "status_code"))
    assert attempts == [(1, None), (2, 200)]
    (body,) = receiver.bodies
    assert body["version"] == "4" and body["status"] == "firing" and body["receiver"] == "oncall"
    assert body["alerts"][0]["labels"]["sli"] == "success"
    assert body["alerts"][0]["generatorURL"] == f"https://tandem.example/topologies/{topology.pk}/#slo"

    # the failures stop: once both page rules' short windows (5 m, 30 m) are cold, the page resolves
    later = now + timedelta(minutes=31)
    for minute in range(1, 32):
        _count(topology.pk, now + timedelta(minutes=minute), ok=1000, failed=0)
    # the ticket's windows (3 d and 6 h) still hold the bad hour: it keeps firing
    assert evaluation.slo_evaluate(topology_id=topology.pk, now=later) == ["success page resolved"]
    alert.refresh_from_db()
    assert alert.state == "resolved" and alert.ended == later
    resolved = Delivery.objects.get(alert=alert, event="resolved")
    assert tasks.deliver(resolved.pk) is None
    assert [b["status"] for b in receiver.bodies] == ["firing", "resolved"]
    assert receiver.bodies[1]["alerts"][0]["endsAt"] == later.isoformat().replace("+00:00", "Z")
    kinds = list(AlertEvent.objects.filter(alert=alert).values_list("kind", flat=True))
    assert kinds == ["fired", "resolved"]
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"slo.created", "slo.target_created", "slo.alert_fired", "slo.alert_resolved"} <= actions
    assert target.pk == resolved.target_id


@pytest.mark.django_db
def test_a_silenced_slo_fires_without_notifying(topology, operator, receiver) -> None:
    slo = services.slo_create(topology=topology, sli="success", objective=0.99, actor=operator)
    delivery.target_create(name="oncall", url=receiver.url, actor=operator)
    now = datetime.now(tz=UTC).replace(microsecond=0)
    services.slo_silence(
        slo=slo, until=now + timedelta(hours=2), reason="decode pool maintenance", actor=operator
    )
    for minute in range(60):
        _count(topology.pk, now - timedelta(minutes=minute), ok=50, failed=50)
    assert "success page fired" in evaluation.slo_evaluate(topology_id=topology.pk, now=now)
    alert = SloAlert.objects.get(slo=slo, severity="page")
    assert not Delivery.objects.filter(alert=alert).exists()
    assert alert.events.filter(kind="suppressed").exists()
    acked = services.alert_acknowledge(alert=alert, actor=operator)
    assert acked.acknowledged_by == "operator-user"
    assert {"slo.silenced", "slo.alert_acknowledged"} <= set(
        AuditEvent.objects.values_list("action", flat=True)
    )
