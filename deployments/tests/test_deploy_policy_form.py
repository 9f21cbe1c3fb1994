"""The deploy-policy form on the panel: operators set it, errors name the fix, viewers see no form."""

from __future__ import annotations

from audit.models import AuditEvent
from deployments.models import DeployPolicy


def _url(topology):
    return f"/deployments/topology/{topology.pk}/deploy-policy/"


def _messages(response):
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_operator_sets_ready_timeout_and_auto_rollback(client, operator, topology):
    client.force_login(operator)
    response = client.post(
        _url(topology), {"ready_timeout_seconds": "120", "auto_rollback": "off"}, follow=True
    )
    policy = DeployPolicy.objects.get(topology=topology)
    assert (policy.ready_timeout_seconds, policy.auto_rollback) == (120, False)
    assert any("ready timeout 120 s, auto-rollback off" in m for m in _messages(response))
    assert AuditEvent.objects.filter(action="topology.deploy_policy").exists()


def test_empty_fields_go_back_to_the_defaults(client, operator, topology, settings):
    settings.DEPLOY_READY_TIMEOUT_SECONDS = 600
    DeployPolicy.objects.create(topology=topology, ready_timeout_seconds=30, auto_rollback=False)
    client.force_login(operator)
    client.post(_url(topology), {"ready_timeout_seconds": "", "auto_rollback": ""})
    policy = DeployPolicy.objects.get(topology=topology)
    assert (policy.ready_timeout_seconds, policy.auto_rollback) == (None, None)
    assert (policy.effective_ready_timeout_seconds, policy.effective_auto_rollback) == (600, True)


def test_out_of_range_timeout_is_refused_with_the_fix(client, operator, topology):
    client.force_login(operator)
    response = client.post(_url(topology), {"ready_timeout_seconds": "5", "auto_rollback": "on"}, follow=True)
    assert not DeployPolicy.objects.filter(topology=topology).exists()
    assert any(
        "ready timeout: use 10 to 86400 seconds, or leave empty for the default" in m
        for m in _messages(response)
    )


def test_unknown_rollback_choice_is_refused_with_the_choices(client, operator, topology):
    client.force_login(operator)
    response = client.post(
        _url(topology), {"ready_timeout_seconds": "60", "auto_rollback": "maybe"}, follow=True
    )
    assert not DeployPolicy.objects.filter(topology=topology).exists()
    assert any("auto rollback: choose on, off, or default" in m for m in _messages(response))


def test_viewer_may_not_set_the_policy_and_sees_no_form(client, viewer, topology):
    client.force_login(viewer)
    assert client.post(_url(topology), {"ready_timeout_seconds": "60"}).status_code == 403
    assert not DeployPolicy.objects.filter(topology=topology).exists()
    panel = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    assert "Save policy" not in panel


def test_operator_panel_shows_the_form_with_current_values(client, operator, topology):
    DeployPolicy.objects.create(topology=topology, ready_timeout_seconds=90, auto_rollback=False)
    client.force_login(operator)
    panel = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    assert "Save policy" in panel
    assert 'name="ready_timeout_seconds"' in panel and 'value="90"' in panel
    assert '<option value="off" selected>off</option>' in panel


def test_operator_chooses_to_keep_a_failed_first_deploy(client, operator, topology):
    client.force_login(operator)
    response = client.post(
        _url(topology),
        {"ready_timeout_seconds": "", "auto_rollback": "", "keep_failed_first_deploy": "keep"},
        follow=True,
    )
    assert DeployPolicy.objects.get(topology=topology).keep_failed_first_deploy is True
    assert any("a failed first deploy is kept" in m for m in _messages(response))
    client.post(_url(topology), {"ready_timeout_seconds": "", "auto_rollback": ""})  # not sent: unchanged
    assert DeployPolicy.objects.get(topology=topology).keep_failed_first_deploy is True
    client.post(_url(topology), {"keep_failed_first_deploy": "remove"})
    assert DeployPolicy.objects.get(topology=topology).keep_failed_first_deploy is False
    refused = client.post(_url(topology), {"keep_failed_first_deploy": "maybe"}, follow=True)
    assert any("choose remove" in m for m in _messages(refused))
