"""The rebalancing panel's forms and the link to the what-if page (plain forms, no JavaScript needed)."""

from __future__ import annotations

from django.test import Client

from rebalancing.models import PlannerConfig, Rebalance


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_operator_sets_the_planner_and_the_ratio_from_the_panel(make_topology, operator):
    topology = make_topology(budget=4)
    client = _client(operator)
    page = client.get(f"/topologies/{topology.pk}/")
    assert page.status_code == 200 and b'id="rebalancing"' in page.content
    saved = client.post(
        f"/rebalancing/topology/{topology.pk}/planner/", {"mode": "advisory", "max_ratio": "2"}
    )
    assert saved.status_code == 302
    config = PlannerConfig.objects.get(topology=topology)
    assert (config.mode, config.max_ratio) == ("advisory", 2.0)
    refused = client.post(
        f"/rebalancing/topology/{topology.pk}/ratio/", {"prefill": "3", "decode": "3"}, follow=True
    )
    assert (
        "Ratio not changed" in refused.content.decode() and "over the budget of 4" in refused.content.decode()
    )
    started = client.post(
        f"/rebalancing/topology/{topology.pk}/ratio/", {"prefill": "2", "decode": "2"}, follow=True
    )
    assert "to 2 prefill / 2 decode started" in started.content.decode()
    assert Rebalance.objects.get(topology=topology).target_prefill == 2
    panel = client.get(f"/rebalancing/topology/{topology.pk}/panel/").content.decode()
    assert 'data-active="true"' in panel and "Planned 1P/1D → 2P/2D as 2 moves" in panel


def test_viewers_see_the_what_if_page_but_cannot_post_the_forms(make_topology, viewer):
    topology = make_topology()
    client = _client(viewer)
    page = client.get(f"/what-if/topology/{topology.pk}/")
    assert page.status_code == 200 and b"an operator starts, cancels and applies them" in page.content
    assert (
        client.post(f"/what-if/topology/{topology.pk}/start/", {"window_seconds": "900"}).status_code == 403
    )
    assert (
        client.post(
            f"/rebalancing/topology/{topology.pk}/ratio/", {"prefill": "2", "decode": "1"}
        ).status_code
        == 403
    )
