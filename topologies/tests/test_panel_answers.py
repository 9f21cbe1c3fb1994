"""Answers of the topology page's panel forms: shown in their panel (not at the page top), in words, with
a refused form's input kept (a secret excepted); a body over the upload limit gets the styled 400 page."""

from __future__ import annotations

import pytest
from django.contrib.messages.storage.base import Message
from django.template import Context, Template

from topologies.templatetags.tandem_ui import plain_words


def test_messages_read_as_words_not_python():
    assert plain_words("use one of ['decode-0', 'prefill-0']") == "use one of decode-0, prefill-0"
    assert (
        plain_words("invalid: {'min_ratio': ['make it at most 2']}")
        == "invalid: min_ratio: make it at most 2"
    )
    assert plain_words("image `vllm:bad` cannot be pulled") == "image <code>vllm:bad</code> cannot be pulled"
    assert plain_words("<b>[not a list</b>") == "&lt;b&gt;[not a list&lt;/b&gt;"  # escaped, left as it is
    assert plain_words("ratio [1, 2]") == "ratio 1, 2"
    assert plain_words("empty [] and {}") == "empty [] and {}"


def test_a_panel_answer_shows_in_its_panel_and_not_at_the_page_top():
    answer = Message(25, "Planner saved: Advisory.", extra_tags="panel-rebalancing")
    other = Message(40, "Not deployed: `busy`", extra_tags="panel-deployments")
    plain = Message(20, "Imported demo.")
    html = Template('{% load tandem_ui %}{% panel_answer "rebalancing" %}').render(
        Context({"messages": [answer, other, plain]})
    )
    assert 'id="answer-rebalancing"' in html and "Planner saved: Advisory." in html
    assert "busy" not in html and "Imported" not in html
    empty = Template('{% load tandem_ui %}{% panel_answer "gateway" %}').render(Context({"messages": []}))
    assert 'id="answer-gateway"' in empty  # the slot is always there, so the redirect's anchor exists


@pytest.mark.django_db
def test_refused_gateway_settings_come_back_in_the_open_form_without_the_key(client, operator, admin_user):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)
    client.force_login(operator)
    sent = {
        "endpoint_url": "http://router.lab:8080",
        "aliases": "qwen-a, qwen-b",
        "fallback_base_url": "https://api.example.com",
        "fallback_model": "gpt-4o-mini",
        "fallback_api_key": "sk-never-shown-again",
    }
    refused = client.post(f"/gateway/topology/{topology.pk}/settings/", sent)
    assert refused.status_code == 302 and refused["Location"].endswith(
        f"/topologies/{topology.pk}/#answer-gateway"
    )
    html = client.get(refused["Location"]).content.decode()
    settings_form = html[html.index('id="gateway-settings"') :]
    assert settings_form.startswith('id="gateway-settings" open')
    assert "Gateway settings not saved: fallback base URL:" in settings_form  # in the panel, by the form
    assert '<ul class="messages"></ul>' in html  # ...and not at the page top
    for name in ("endpoint_url", "aliases", "fallback_base_url", "fallback_model"):
        assert f'value="{sent[name]}"' in settings_form
    assert "sk-never-shown-again" not in html and "data-key-not-kept" in settings_form


@pytest.mark.django_db
def test_a_3_mb_import_paste_gets_the_styled_page_that_says_back_keeps_the_text(client, operator):
    client.force_login(operator)
    answer = client.post("/topologies/import/", {"yaml": "# x\n" * 800_000, "action": "preview"})
    assert answer.status_code == 400
    html = answer.content.decode()
    assert "Too much to send at once" in html and "Back" in html and "Bad Request (400)" not in html
    assert 'class="topbar"' in html  # a page of Tandem, with its navigation


@pytest.mark.django_db
def test_the_problems_tile_is_red_only_while_it_counts_something(client, viewer, admin_user):
    from clusters.models import Cluster
    from deployments.models import Deployment, State
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    client.force_login(viewer)
    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)
    calm = client.get("/").content.decode()  # not deployed yet: not a problem
    assert 'class="kpi-tile" data-problems-tile' in calm
    Deployment.objects.create(
        topology=topology,
        topology_name=topology.name,
        revision=topology.current_revision,
        revision_number=topology.current_revision.number,
        state=State.FAILED,
    )
    red = client.get("/").content.decode()
    assert 'class="kpi-tile kpi-violated" data-problems-tile' in red
    assert "data-problem-count>1<" in red
    assert "data-readonly-hint" in red  # and the viewer is told the pages are read-only
