"""`manage.py deploy_demo` creates the demo topology once and never starts a second deploy."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from deployments.models import Deployment, State


def _run(*args: str) -> str:
    out = StringIO()
    call_command("deploy_demo", *args, stdout=out)
    return out.getvalue().strip()


def test_deploy_demo_is_idempotent(cluster):
    from topologies.models import Topology

    first = _run("--cluster", "lab")
    deployment = Deployment.objects.get()
    assert first == f"demo topology deepseek-v2-lite: deployment #{deployment.pk} queued"
    assert _run("--cluster", "lab") == first
    assert Topology.objects.count() == 1 and Deployment.objects.count() == 1

    topology = Topology.objects.get()
    Deployment.objects.filter(pk=deployment.pk).update(state=State.SUCCEEDED)
    Topology.objects.filter(pk=topology.pk).update(deployed_revision=topology.current_revision)
    assert _run("--cluster", "lab") == "demo topology deepseek-v2-lite already running revision 1"


def test_deploy_demo_names_the_missing_cluster(db):
    with pytest.raises(CommandError, match="no cluster named 'nowhere'"):
        _run("--cluster", "nowhere")
