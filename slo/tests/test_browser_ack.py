"""In Chromium: a firing burn-rate alert shows on the topology page with its budget bar and deliveries,
an operator acknowledges it there, and the Overview lists it; both pages at 1440 and 390 px."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_a_firing_alert_is_acknowledged_on_the_topology_page(page, live_server, operator, topology, tmp_path):
    from slo import delivery, evaluation, services
    from slo.models import SloAlert
    from telemetry.derive import RequestWindow, TopologyOutcomes

    services.slo_create_defaults(topology=topology, actor=operator)
    delivery.target_create(
        name="on-call", url="http://127.0.0.1:9/hook/abcdef", format="slack", actor=operator
    )
    now = datetime.now(tz=UTC)
    bad = RequestWindow(ttft=[], itl=[], outcomes=TopologyOutcomes(ok=90, failed=10, client=0, roles={}))
    for minute in range(20):
        services.sli_record(
            topology_id=topology.pk, ts=(now - timedelta(minutes=minute)).timestamp(), requests=bad
        )
    evaluation.slo_evaluate(topology_id=topology.pk, now=now)
    alert = SloAlert.objects.get(slo__sli="success", severity="page")

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")
    for width in (390, 1440):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/topologies/{topology.pk}/#slo")
        panel = page.locator("#slo")
        assert "2 alerts firing" in panel.locator("[data-role=slo-firing]").inner_text()
        assert (
            panel.locator("tr[data-slo=success] [data-role=budget]").inner_text() == "exhausted: 20.0× spent"
        )
        assert "on-call" in panel.locator("[data-role=deliveries]").inner_text()
        assert panel.locator("tr[data-slo=success]").count() == 1
        assert panel.locator("input[name=objective_percent]").first.input_value() == "99.5"  # success, first
        panel.screenshot(path=str(tmp_path / f"topology-{width}.png"))
    page.locator(f"[data-alert='{alert.pk}'] [data-role=ack]").click()
    page.wait_for_url(f"**/topologies/{topology.pk}/#answer-slo")
    assert page.locator("#answer-slo").inner_text().strip() == "Alert acknowledged"
    acked = page.locator(f"[data-alert='{alert.pk}'] [data-role=acked]")
    assert acked.inner_text() == f"acknowledged by {operator.username}"
    assert page.locator(f"[data-alert='{alert.pk}'] [data-role=ack]").count() == 0
    alert.refresh_from_db()
    assert alert.acknowledged_by == operator.username
    for width in (390, 1440):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/")
        table = page.locator("[data-role=overview-slo]")
        assert "page success · acked" in table.inner_text()
        assert table.locator("[data-role=overview-deliveries]").inner_text() == "2 waiting"  # no worker here
        assert table.locator("[data-role=overview-ack]").count() == 1  # the ticket, not yet acknowledged
        table.screenshot(path=str(tmp_path / f"overview-{width}.png"))
