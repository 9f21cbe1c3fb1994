from __future__ import annotations

import pytest
from django.urls import reverse

from audit.services import audit_record

pytestmark = pytest.mark.django_db


def test_activity_lists_who_did_what_from_where(client, viewer, operator):
    audit_record(action="topology.deploy", actor=operator, source_ip="10.0.0.5")
    client.force_login(viewer)
    body = client.get(reverse("audit:activity")).content.decode()
    assert "topology.deploy" in body and operator.username in body and "10.0.0.5" in body


def test_activity_filters_use_the_same_rules_as_the_api(client, viewer, operator):
    audit_record(action="topology.deploy", actor=operator)
    audit_record(action="keys.rotate", actor=operator)
    client.force_login(viewer)
    body = client.get(reverse("audit:activity"), {"action": "keys"}).content.decode()
    assert "<code>keys.rotate</code>" in body
    assert "<code>topology.deploy</code>" not in body


def test_activity_paginates(client, viewer):
    for index in range(55):
        audit_record(action=f"demo.step{index}")
    client.force_login(viewer)
    first = client.get(reverse("audit:activity")).content.decode()
    assert "Page 1 of 2" in first
    assert "demo.step54" in first and "demo.step0<" not in first
    second = client.get(reverse("audit:activity"), {"page": 2}).content.decode()
    assert "demo.step0<" in second


def test_empty_states_say_what_happens_next(client, viewer):
    client.force_login(viewer)
    body = client.get(reverse("audit:activity")).content.decode()
    # the viewer's own login is not audited by force_login's session, but the page may show it
    assert "Nothing has happened yet" in body or "auth.login" in body
    body = client.get(reverse("audit:activity"), {"action": "nothing.like.this"}).content.decode()
    assert "No activity matches these filters" in body


def test_activity_needs_login(client):
    response = client.get(reverse("audit:activity"))
    assert response.status_code == 302
    assert reverse("accounts:login") in response["Location"]
