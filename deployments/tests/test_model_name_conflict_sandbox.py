"""On the sandbox's Kthena router: a second topology serving the same model name stops at preflight with
nothing applied, naming the first; with a reason it deploys, and the step log says who chose to."""

from __future__ import annotations

import pytest

import kube
from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now
from kube.labels import topology_selector

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_same_model_name_on_one_router_stops_at_preflight_unless_overridden(
    new_topology, operator, conn, fast_deploys
):
    from deployments import runner
    from deployments.services import deployment_start

    demo = new_topology(name="demo")
    assert deploy_now(demo, operator).state == State.SUCCEEDED
    imported = new_topology(name="imported")
    blocked = deploy_now(imported, operator)
    assert blocked.state == State.FAILED
    assert [d["code"] for d in blocked.diagnosis] == ["model_name_taken"]
    assert "topology demo" in blocked.diagnosis[0]["message"]
    assert blocked.diagnosis[0]["fix"].startswith("give this topology another model name")
    assert kube.list_pods(conn, imported.namespace, topology_selector(imported.pk)) == []
    assert imported.deployed_revision is None

    job = deployment_start(
        topology=imported, actor=operator, source_ip=None, override_preflight="demo goes away tonight"
    )
    assert runner.run(job.pk, worker="test-worker") == "claimed"
    job.refresh_from_db()
    assert job.state == State.SUCCEEDED, (job.error, job.diagnosis)
    steps = [s.message for s in job.steps.all()]
    assert any(
        m.startswith(
            "Preflight found 1 blocking problem; deploying anyway, as operator-user chose "
            "(demo goes away tonight): topology demo"
        )
        for m in steps
    ), steps
