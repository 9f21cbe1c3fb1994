"""The SLO API: viewers read, operators change; secrets never come back; bad input names its field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from slo import evaluation, services
from slo.models import Delivery, NotificationTarget, SloAlert
from telemetry.derive import RequestWindow, TopologyOutcomes

pytestmark = pytest.mark.django_db


def _burn(topology_id: int) -> None:
    now = datetime.now(tz=UTC)
    window = RequestWindow(ttft=[], itl=[], outcomes=TopologyOutcomes(ok=50, failed=50, client=0, roles={}))
    for minute in range(10):
        services.sli_record(
            topology_id=topology_id, ts=(now - timedelta(minutes=minute)).timestamp(), requests=window
        )
    evaluation.slo_evaluate(topology_id=topology_id, now=now)


def test_slos_alerts_and_targets_through_the_api(api_client, topology, viewer, operator) -> None:
    api_client.force_authenticate(operator)
    made = api_client.post(f"/api/v1/topologies/{topology.pk}/slos/defaults/")
    assert made.status_code == 201, made.content
    assert sorted(s["sli"] for s in made.json()) == ["success", "tbt", "ttft"]
    ttft = next(s for s in made.json() if s["sli"] == "ttft")
    assert ttft["threshold_ms"] == topology.slo_ttft_ms and ttft["objective_percent"] == 99.0
    assert ttft["budget_colour"] == "unknown" and next(r["name"] for r in ttft["rules"]) == "page 1 h/5 m"
    bad = api_client.patch(f"/api/v1/slos/{ttft['id']}/", {"objective_percent": 100}, format="json")
    assert bad.status_code == 400 and "objective_percent" in bad.json()["error"]["fields"]
    changed = api_client.patch(f"/api/v1/slos/{ttft['id']}/", {"threshold_ms": 900}, format="json")
    assert changed.status_code == 200 and "TTFT ≤ 900 ms" in changed.json()["text"]

    url = "https://hooks.example.com/services/T0/B0/secretTOKENwxyz"
    target = api_client.post("/api/v1/notification-targets/", {"name": "chat", "url": url, "format": "slack"})
    assert target.status_code == 201 and target.json()["url"] == "https://hooks.example.com/…wxyz"
    assert NotificationTarget.objects.get().url == url  # kept whole, encrypted at rest
    bad_url = api_client.post("/api/v1/notification-targets/", {"name": "x", "url": "hooks.example.com"})
    assert bad_url.status_code == 400 and "url" in bad_url.json()["error"]["fields"]
    tested = api_client.post(f"/api/v1/notification-targets/{target.json()['id']}/test/")
    assert tested.status_code == 202 and tested.json()["event"] == "test"
    assert tested.json()["payload"]["text"].startswith("Page: ")

    _burn(topology.pk)
    alert = SloAlert.objects.get(slo__sli="success", severity="page")
    assert Delivery.objects.filter(alert=alert).count() == 1  # the global target gets it

    api_client.force_authenticate(viewer)
    listed = api_client.get(f"/api/v1/slo-alerts/?topology={topology.pk}&state=firing")
    assert listed.status_code == 200 and {a["id"] for a in listed.json()["results"]} >= {alert.pk}
    assert "secretTOKEN" not in api_client.get("/api/v1/notification-targets/").content.decode()
    assert api_client.get("/api/v1/notification-deliveries/").status_code == 200
    refused = api_client.post(f"/api/v1/slo-alerts/{alert.pk}/acknowledge/")
    assert refused.status_code == 403

    api_client.force_authenticate(operator)
    acked = api_client.post(f"/api/v1/slo-alerts/{alert.pk}/acknowledge/")
    assert acked.status_code == 200 and acked.json()["acknowledged_by"] == "operator-user"
    assert [e["kind"] for e in acked.json()["events"]] == ["fired", "acknowledged"]
    assert api_client.post(f"/api/v1/slo-alerts/{alert.pk}/acknowledge/").status_code == 409
    past = api_client.post(
        f"/api/v1/slo-alerts/{alert.pk}/silence/", {"until": "2020-01-01T00:00:00Z", "reason": "x"}
    )
    assert past.status_code == 400 and "until" in past.json()["error"]["fields"]
    until = (datetime.now(tz=UTC) + timedelta(hours=2)).isoformat()
    silenced = api_client.post(
        f"/api/v1/slo-alerts/{alert.pk}/silence/", {"until": until, "reason": "maintenance"}
    )
    assert silenced.status_code == 200 and silenced.json()["events"][-1]["kind"] == "silenced"
    slo = api_client.get(f"/api/v1/slos/{alert.slo_id}/").json()
    assert slo["silenced"] and slo["silence_reason"] == "maintenance" and slo["budget_colour"] == "bad"
