"""The SLO panel's forms: operators add, change and silence; viewers see no forms and are refused."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.template.loader import render_to_string
from django.test import Client, RequestFactory

from audit.models import AuditEvent
from slo.models import NotificationTarget, Slo
from slo.selectors import topology_panel_context

pytestmark = pytest.mark.django_db


def _panel(topology, user) -> str:  # type: ignore[no-untyped-def]
    """The SLO panel as the topology page renders it for ``user`` (the whole page is checked in Chromium)."""
    request = RequestFactory().get(f"/topologies/{topology.pk}/")
    request.user = user
    context = {"topology": topology, **topology_panel_context(topology, request)}
    return render_to_string("slo/_topology_panel.html", context, request=request)


def _answer(response) -> str:  # type: ignore[no-untyped-def]
    """What the panel will say after the redirect (the topology page is not rendered for it)."""
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def test_the_panel_forms_change_slos_and_answer_in_the_panel(topology, operator, viewer) -> None:
    client = Client()
    client.force_login(operator)
    back = client.post(f"/slo/topologies/{topology.pk}/defaults/")
    assert back.status_code == 302 and back["Location"].endswith(f"/topologies/{topology.pk}/#answer-slo")
    success = Slo.objects.get(topology=topology, sli="success")
    refused = client.post(f"/slo/slos/{success.pk}/edit/", {"objective_percent": "١٠٠"})
    assert "SLO not saved: objective: write a number with the digits 0-9" in _answer(refused)
    client.post(f"/slo/slos/{success.pk}/edit/", {"objective_percent": "99.9", "window_days": "30"})
    success.refresh_from_db()
    assert (success.objective, success.window_days) == (pytest.approx(0.999), 30)
    no_reason = client.post(f"/slo/slos/{success.pk}/silence/", {"hours": "2", "reason": " "})
    assert "Not silenced: reason: say why" in _answer(no_reason)
    client.post(f"/slo/slos/{success.pk}/silence/", {"hours": "2", "reason": "load test"})
    success.refresh_from_db()
    assert success.silence_reason == "load test" and success.silenced_by == operator.username
    client.post(
        f"/slo/topologies/{topology.pk}/targets/",
        {"name": "hook", "url": "https://h.example/x/tok9", "scope": "all"},
    )
    assert NotificationTarget.objects.get(name="hook").topology is None
    page = _panel(topology, operator)
    assert "silenced until" in page and "load test" in page and "https://h.example/…tok9" in page
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"slo.created", "slo.updated", "slo.silenced", "slo.target_created"} <= actions

    client.force_login(viewer)
    page = _panel(topology, viewer)
    assert 'id="slo"' in page and "Add a notification target" not in page and "tok9" in page
    assert "https://h.example/x/tok9" not in page
    assert client.post(f"/slo/slos/{success.pk}/unsilence/").status_code == 403
