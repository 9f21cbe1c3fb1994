"""Activity writes a detail the way the pages do: `quoted` names as code, a Python dict or list written
into a message as "name: value", never backticks or braces."""

from __future__ import annotations

import pytest

from audit.services import audit_record

pytestmark = pytest.mark.django_db


def test_a_failed_deploy_reads_as_words(client, viewer):
    audit_record(
        action="deployment.failed",
        actor=None,
        detail={"error": "Secret `hf-token` not found; asked {'decode': 2} on ['node-a', 'node-b']"},
    )
    client.force_login(viewer)
    html = client.get("/activity/").content.decode()
    row = html.split('data-action="deployment.failed"', 1)[1].split("</tr>", 1)[0]
    details = row.split('class="details"', 1)[1].split("</td>", 1)[0]
    assert "Secret <code>hf-token</code> not found; asked decode: 2 on node-a, node-b" in details
    assert "`" not in details and "{&#x27;" not in details
