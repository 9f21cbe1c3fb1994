"""The deployments panel on the topology page: words for every state, buttons only for operators."""

from __future__ import annotations

import pytest

from deployments.models import Deployment, State
from deployments.services import deployment_start


@pytest.fixture
def failed_deployment(topology, operator):
    deployment = deployment_start(topology=topology, actor=operator, source_ip="127.0.0.1")
    Deployment.objects.filter(pk=deployment.pk).update(
        state=State.ROLLED_BACK,
        rolled_back_to=topology.current_revision,
        diagnosis=[
            {
                "code": "image_pull",
                "message": "The decode image `repo/vllm:v1-broken` cannot be pulled.",
                "fix": "Check that the tag exists in the registry.",
                "pods": ["ds-decode-0"],
            }
        ],
    )
    return deployment


def test_viewer_sees_state_and_diagnosis_but_no_buttons(client, viewer, topology, failed_deployment):
    client.force_login(viewer)
    page = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    assert "Rolled back" in page
    assert "cannot be pulled" in page and "Check that the tag exists" in page
    assert "ds-decode-0" in page
    assert (
        "Deploy revision" not in page and "Roll back</button>" not in page and ">Scale</button>" not in page
    )


def test_operator_sees_deploy_rollback_and_scale(client, operator, topology, failed_deployment):
    client.force_login(operator)
    page = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    assert "Deploy revision 1" in page
    assert ">Scale</button>" in page
    assert f'data-topology="{topology.pk}"' in page


def test_drift_banner_lists_differences_with_reapply(client, operator, topology):
    topology.deployed_revision = topology.current_revision
    topology.drift_state = "drifted"
    topology.drift_detail = {
        "differences": ["ModelServing/x: spec.template.roles[1].replicas live 1, desired 2"]
    }
    topology.save()
    client.force_login(operator)
    page = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    assert "no longer matches revision 1" in page
    assert "roles[1].replicas live 1, desired 2" in page
    assert "Re-apply revision 1" in page


def test_never_deployed_topology_explains_what_deploy_does(client, viewer, topology):
    client.force_login(viewer)
    page = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    assert "Not deployed yet" in page and "last good revision" in page


def test_page_deploy_form_queues_and_returns_to_the_topology(client, operator, topology):
    client.force_login(operator)
    response = client.post(f"/deployments/topology/{topology.pk}/deploy/")
    assert response.status_code == 302
    assert response["Location"] == f"/topologies/{topology.pk}/#deployments"
    assert Deployment.objects.filter(topology=topology, state=State.QUEUED).count() == 1
    queued = Deployment.objects.get(topology=topology)
    again = client.post(f"/deployments/topology/{topology.pk}/deploy/", follow=True)
    page = again.content.decode()
    assert "Not deployed: the deploy of revision 1 is queued; wait for it or cancel it" in page
    # The job is named by what it does, never by a number counted across every topology.
    assert "<strong>Deploy of revision 1</strong>" in page
    assert f"#{queued.pk}<" not in page and f"Deployment #{queued.pk}" not in page


def test_page_forms_refuse_viewers(client, viewer, topology):
    client.force_login(viewer)
    assert client.post(f"/deployments/topology/{topology.pk}/deploy/").status_code == 403
    assert (
        client.post(
            f"/deployments/topology/{topology.pk}/scale/", {"role": "decode", "replicas": 2}
        ).status_code
        == 403
    )
    assert not Deployment.objects.exists()


def test_page_scale_form_explains_bad_input(client, operator, topology):
    client.force_login(operator)
    page = client.post(
        f"/deployments/topology/{topology.pk}/scale/", {"role": "decode", "replicas": "many"}, follow=True
    ).content.decode()
    assert "choose prefill or decode and a replica count of 0 or more" in page


def test_topology_page_shows_the_deployments_panel(client, viewer, topology):
    client.force_login(viewer)
    page = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert 'class="panel deploy-panel"' in page


def test_quoted_names_show_as_code_and_html_is_escaped():
    from deployments.templatetags.deployments_tags import ticks_to_code

    assert ticks_to_code("image `a:b` <script>") == "image <code>a:b</code> &lt;script&gt;"


def test_pod_revision_names_the_deployed_revision_whose_template_the_pod_runs(topology, operator):
    from deployments.plan import template_hashes
    from deployments.selectors import pod_template_revisions
    from topologies.services import topology_update

    first = topology.current_revision
    spec = dict(topology.spec)
    spec["roles"]["prefill"]["extra_args"] = ["--max-model-len", "4096"]
    topology_update(topology=topology, spec=spec, actor=operator, message="prefill only")
    topology.refresh_from_db()
    topology.deployed_revision = first
    old, new = template_hashes(first.manifests), template_hashes(topology.current_revision.manifests)
    assert old["decode"] == new["decode"] and old["prefill"] != new["prefill"]
    assert pod_template_revisions(topology) == {
        ("prefill", old["prefill"]): 1,
        ("decode", old["decode"]): 1,  # the deployed revision wins for a shared template
        ("prefill", new["prefill"]): 2,
    }
