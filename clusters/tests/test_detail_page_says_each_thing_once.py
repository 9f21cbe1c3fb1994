"""The cluster page names each verb of a resource once, and drops a metrics-source recommendation that
no longer applies (the source it recommends is in use, or the source in use answered the probe)."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from clusters.access import PERMISSIONS, needs
from clusters.models import AuthMethod, Cluster

pytestmark = pytest.mark.django_db


def _cluster(**fields) -> Cluster:
    permissions = [
        {
            "verb": n.verb,
            "group": n.group,
            "resource": n.resource,
            "label": f"{n.verb} {n.resource}",
            "why": n.why,
            "kthena": False,
            "only_for": n.only_for,
            "allowed": True,
        }
        for n in needs(PERMISSIONS)
    ]
    return Cluster.objects.create(
        name="lab",
        auth_method=AuthMethod.TOKEN,
        server="http://127.0.0.1:1",
        token="t0ken-for-the-page-0123456789",
        health_state="healthy",
        permissions=permissions,
        last_checked=timezone.now(),
        **fields,
    )


def _row(html: str, resource: str) -> str:
    rows = re.findall(r"<tr[^>]*>\s*<td class=\"mono\">" + re.escape(resource) + r"<.*?</tr>", html, re.S)
    assert len(rows) == 1, rows
    return rows[0]


def test_pods_proxy_is_one_row_with_each_verb_once_and_both_reasons(client, viewer):
    cluster = _cluster()
    client.force_login(viewer)
    row = _row(client.get(f"/clusters/{cluster.pk}/").content.decode(), "pods/proxy")
    verbs = re.findall(r'<span class="verb verb-allowed" title="allowed">(\w+)</span>', row)
    assert sorted(verbs) == ["create", "get"]
    assert "scrape engine metrics" in row and "drain, unlink, switch" in row
    log_row = _row(client.get(f"/clusters/{cluster.pk}/").content.decode(), "pods/log")
    assert log_row.count("show why a pod failed") == 1


PROBE = {
    "recommended": "proxy",
    "reason": "no source answered yet (direct: refused); the API-server proxy works wherever ...",
    "checked": 1.0,
    "results": {
        "direct": {"ok": False, "message": "refused"},
        "proxy": {"ok": False, "message": "get on pods/proxy is denied"},
        "prometheus": {"ok": True, "message": "answered"},
    },
}


@pytest.mark.parametrize(
    ("source", "shown"),
    [("direct", True), ("proxy", False), ("prometheus", False)],
    ids=["still-applies", "recommended-source-in-use", "source-in-use-answered"],
)
def test_a_recommendation_shows_only_while_it_applies(client, viewer, source, shown):
    cluster = _cluster(metrics_source=source, metrics_probe=PROBE)
    client.force_login(viewer)
    html = client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert ("recommends <strong>proxy</strong>" in html) is shown
    assert 'data-source="prometheus"' in html  # the probe's findings stay listed either way
