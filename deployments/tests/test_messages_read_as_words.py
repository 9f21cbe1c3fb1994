"""Messages shown to people on the Deployments panel and the removal page: `quoted` names as code and
Python dicts written out as "name: value", never backticks or braces."""

from __future__ import annotations

import pytest

from deployments.models import Deployment, State
from deployments.services import deployment_start

STEP = "The decode pods cannot start: Secret `hf-token` not found; asked {'decode': 2}."


@pytest.fixture
def failed_deployment(topology, operator):
    deployment = deployment_start(topology=topology, actor=operator, source_ip="127.0.0.1")
    Deployment.objects.filter(pk=deployment.pk).update(state=State.FAILED)
    deployment.steps.create(state=State.FAILED, message=STEP)
    return deployment


def test_the_panel_shows_the_last_step_without_backticks_or_braces(
    client, viewer, topology, failed_deployment
):
    client.force_login(viewer)
    page = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    current = page.split('data-role="message"', 1)[1].split("</span>", 1)[0]
    assert "Secret <code>hf-token</code> not found; asked decode: 2." in current
    assert "`" not in page and "{&#x27;" not in page
