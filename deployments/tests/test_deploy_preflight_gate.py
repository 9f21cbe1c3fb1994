"""Preflight before a deploy: the API refuses a revision preflight blocks (409 naming each finding and
``override_preflight``) instead of accepting a job that would stop at preflight; the deployments panel reads
preflight's cluster facts through a short cache keyed by spec, deploy state and cluster, within a bound, so
a silent cluster cannot hang the topology page, and a fixed spec brings the Deploy button back at once."""

from __future__ import annotations

import socket
import time

from django.core.cache import cache
from django.urls import reverse

from deployments.models import Deployment
from topologies.models import Topology
from topologies.presets import preset_spec
from topologies.services import topology_create, topology_update

NAME = "deepseek-ai/DeepSeekV2"  # the preset's model name


def _second_on_one_router(cluster, admin_user) -> Topology:
    """demo runs on ``cluster`` and serves NAME; a second topology claims NAME on the same Kthena router."""
    demo = topology_create(
        cluster=cluster, spec=preset_spec("deepseek-ascend-mooncake", namespace="demo"), actor=admin_user
    )
    Topology.objects.filter(pk=demo.pk).update(deployed_revision=demo.current_revision)
    spec = preset_spec("deepseek-ascend-mooncake", namespace="imported", name="imported")
    return topology_create(cluster=cluster, spec=spec, actor=admin_user)


def test_api_deploy_answers_409_naming_the_blocking_findings_and_the_override(
    api_client, operator, admin_user, cluster
):
    imported = _second_on_one_router(cluster, admin_user)
    api_client.force_authenticate(operator)
    url = f"/api/v1/topologies/{imported.pk}/deploy/"
    refused = api_client.post(url, {}, format="json")
    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "preflight_blocked"
    assert "model_name_taken" in error["message"] and "override_preflight" in error["message"]
    assert "fix: give this topology another model name" in error["fields"]["routing.model_name"][0]
    assert "audit log" in error["fields"]["override_preflight"][0]
    # The cluster (127.0.0.1:9) refuses connections: that alone is left to the job's own preflight.
    assert "cluster" not in error["fields"]
    assert not Deployment.objects.filter(topology=imported).exists()
    blank = api_client.post(url, {"override_preflight": "   "}, format="json")
    assert blank.status_code == 409
    accepted = api_client.post(url, {"override_preflight": "demo goes away tonight"}, format="json")
    assert accepted.status_code == 202, accepted.content


def test_the_served_schema_documents_the_409(api_client, operator):
    api_client.force_authenticate(operator)
    schema = api_client.get("/api/v1/schema/?format=json").json()
    deploy = schema["paths"]["/api/v1/topologies/{id}/deploy/"]["post"]
    assert "409" in deploy["responses"] and "preflight_blocked" in deploy["description"]


def test_panel_does_not_wait_for_a_cluster_that_never_answers(client, operator, admin_user, settings):
    from clusters.models import Cluster

    settings.PREFLIGHT_PAGE_TIMEOUT_SECONDS = 0.5
    silent = socket.socket()  # accepts connections (the kernel's backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        port = silent.getsockname()[1]
        lab = Cluster.objects.create(name="silent", auth_method="token", server=f"http://127.0.0.1:{port}")
        topology = topology_create(
            cluster=lab, spec=preset_spec("deepseek-ascend-mooncake"), actor=admin_user
        )
        client.force_login(operator)
        started = time.monotonic()
        page = client.get(reverse("deployments:panel", args=[topology.pk]))
        took = time.monotonic() - started
        assert page.status_code == 200 and took < 3, took
        text = page.content.decode()
        assert 'data-code="cluster_unreachable"' in text
        assert "did not answer within 0.5 s" in text and "reload in a moment" in text
    finally:
        silent.close()


def test_deploy_button_comes_back_when_the_spec_is_fixed(client, operator, admin_user, lab):
    from topologies.preflight_cache import facts_key
    from topologies.spec import TopologySpec

    spec = preset_spec("deepseek-ascend-mooncake", namespace="gate")
    for role in ("prefill", "decode"):
        spec["roles"][role]["accelerator_resource"] = "huawei.com/Ascend910"  # no node offers it
    topology = topology_create(cluster=lab, spec=spec, actor=admin_user)
    client.force_login(operator)
    panel = reverse("deployments:panel", args=[topology.pk])
    blocked = client.get(panel).content.decode()
    assert "data-deploy-blocked" in blocked and 'title="Preflight blocks this deploy' in blocked
    first_key = facts_key(cluster=lab, spec=TopologySpec.from_dict(topology.spec), topology=topology)
    assert cache.get(first_key) is not None  # the next view within 30 s reads no cluster
    for role in ("prefill", "decode"):
        spec["roles"][role]["accelerator_resource"] = "huawei.com/ascend-1980"
    fixed = topology_update(topology=topology, spec=spec, actor=operator)
    assert facts_key(cluster=lab, spec=TopologySpec.from_dict(fixed.spec), topology=fixed) != first_key
    open_again = client.get(panel).content.decode()
    assert "data-deploy-blocked" not in open_again
    assert "data-deploy " in open_again or "data-deploy>" in open_again
    assert 'title="Preflight blocks this deploy' not in open_again
