"""In a real Chromium: a planner decision shows on the topology page's time axis (the Live panel's markers
and events, drawn from the stored history) with its explanation, and in the Rebalancing panel with its
rule and outcome."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from rebalancing.models import Decision, Outcome, PlannerMode
from rebalancing.services import planner_config_set, planner_tick
from tests.support import subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
EXPLANATION = "add one prefill: TTFT p95 2.40 s > 1.50 s target for 2 intervals"


def _login(page, base: str, viewer) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", viewer.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium", "args": CHROMIUM_ARGS}


def test_an_advisory_decision_is_shown_on_the_time_axis_with_its_explanation(
    page, make_topology, snapshot, viewer, operator
):
    topology = make_topology(budget=3)
    errors: list[BaseException] = []

    def decide() -> None:
        # Its own thread: Playwright's sync API keeps an event loop running in the test's thread.
        try:
            config = planner_config_set(
                topology=topology,
                mode=PlannerMode.ADVISORY,
                params={"breach_intervals": 2},
                min_ratio=None,
                max_ratio=None,
                actor=operator,
                source_ip=None,
            )
            snapshot(topology, ttft_ms=2400, tbt_ms=20)
            now = time.time()
            for i in range(2):
                planner_tick(config=config, now=now + i)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    worker = threading.Thread(target=decide)
    worker.start()
    worker.join(30)
    assert not errors, errors
    decision = Decision.objects.get(topology=topology, outcome=Outcome.ADVISED)
    assert EXPLANATION in decision.explanation
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 1100})
    with uvicorn_server(subprocess_env()) as base:
        _login(page, base, viewer)
        page.goto(f"{base}/topologies/{topology.pk}/")
        marker = page.locator('#telemetry-live [data-events] li[data-kind="role_change"]')
        marker.first.wait_for(timeout=20_000)
        text = marker.first.inner_text()
        assert f"advice: {EXPLANATION}" in text, text
        row = page.locator(f'#rebalancing tr[data-decision="{decision.pk}"]')
        assert row.get_attribute("data-rule") == "ttft_breach"
        assert "1P/1D → 2P/1D" in row.inner_text() and "Advised" in row.inner_text()
        assert page.locator("#rebalancing [data-planner-mode]").inner_text().startswith("Advisory")
        assert page.locator('#rebalancing form[data-form="ratio"]').count() == 0  # viewers cannot rebalance
        page.screenshot(path=str(SHOTS / "rebalancing-decision.png"), full_page=True)


def test_an_in_place_ratio_change_in_progress_shows_its_plan_and_steps(page, make_topology, viewer):
    from rebalancing.models import Rebalance, RebalanceKind

    topology = make_topology(budget=4, replicas=(1, 3))
    now = time.time()
    names = ["t-0-decode-2-0", "t-0-decode-1-0"]
    steps = [
        "Planned 1P/3D → 3P/1D as 2 in-place switches (MindIE reassigns a running instance's role), one at "
        f"a time: {names[0]} → prefill, {names[1]} → prefill",
        f"Stopped routing new requests to {', '.join(names)} (serving-role label → none): they drain "
        "together, and each is switched in turn once drained",
        f"Switch 1/2: {names[0]} decode → prefill",
        f"Drained {names[0]}: no request running or waiting (0.4 s)",
        f"Switched {names[0]} decode → prefill (POST /v1/role/prefill, 0.4 s)",
        f"Verified: {names[0]} serves prefill (RoleReady, every link ok)",
        f"Switch 2/2: {names[1]} decode → prefill",
    ]
    Rebalance.objects.create(
        topology=topology,
        kind=RebalanceKind.RATIO,
        from_prefill=1,
        from_decode=3,
        target_prefill=3,
        target_decode=1,
        moves=[{"role": "prefill", "replicas": 2 + i, "instance": n} for i, n in enumerate(names)],
        next_move=1,
        params={"path": "in_place", "switches": [{"instance": n} for n in names]},
        log=[{"ts": now + i, "message": m} for i, m in enumerate(steps)],
        requested_by_label="operator",
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 1100})
    with uvicorn_server(subprocess_env()) as base:
        _login(page, base, viewer)
        page.goto(f"{base}/topologies/{topology.pk}/")
        current = page.locator("#rebalancing [data-rebalance]")
        text = current.inner_text()
        assert "1P/3D → 3P/1D · 1 of 2 switches done" in text, text
        assert "In place: no pod is added, removed or restarted" in text and "scale job" not in text
        assert page.locator("#rebalancing .rebalance-log li").count() == len(steps)
        current.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "rebalancing-in-place.png"), full_page=True)


def test_a_staged_move_is_shown_on_the_time_axis_with_its_explanation(page, cluster, viewer, operator):
    from rebalancing.tests.snapshots import prefill_short
    from telemetry import cache
    from topologies.models import Topology
    from topologies.services import topology_create
    from topologies.tests.combinations import combination

    role = {"accelerator_resource": "huawei.com/ascend-1980", "accelerator_count": 2}
    spec = combination(
        "mindie",
        "llm-datadist",
        "kthena",
        roles={"prefill": {**role, "replicas": 1}, "decode": {**role, "replicas": 2}},
        rebalancing={
            "prefill": {"min": 1, "max": 3},
            "decode": {"min": 1, "max": 3},
            "accelerator_budget": 6,
        },
    )
    topology = topology_create(cluster=cluster, spec=spec, actor=operator)
    cache.forget(topology.pk)
    Topology.objects.filter(pk=topology.pk).update(deployed_revision=topology.current_revision)
    errors: list[BaseException] = []

    def decide() -> None:
        try:
            config = planner_config_set(
                topology=topology,
                mode=PlannerMode.ADVISORY,
                params={"breach_intervals": 2, "prefill_tokens_per_s": 1000, "decode_tokens_per_s": 1000},
                min_ratio=None,
                max_ratio=None,
                actor=operator,
                source_ip=None,
            )
            prefill_short(topology, waiting=8)
            planner_tick(config=config, now=time.time())
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    try:
        worker = threading.Thread(target=decide)
        worker.start()
        worker.join(30)
        assert not errors, errors
        decision = Decision.objects.get(topology=topology)
        assert (decision.rule, decision.action, decision.outcome) == (
            "stage",
            "stage_prefill",
            Outcome.ADVISED,
        )
        page.set_viewport_size({"width": 1440, "height": 1100})
        with uvicorn_server(subprocess_env()) as base:
            _login(page, base, viewer)
            page.goto(f"{base}/topologies/{topology.pk}/")
            marker = page.locator('#telemetry-live [data-events] li[data-kind="role_change"]')
            marker.first.wait_for(timeout=20_000)
            text = marker.first.inner_text()
            assert "advice: 1 decode out of routing ahead of a move to 2P/1D" in text, text
            row = page.locator(f'#rebalancing tr[data-decision="{decision.pk}"]')
            assert row.get_attribute("data-rule") == "stage"
            assert "1P/2D → 2P/1D" in row.inner_text() and "Advised" in row.inner_text()
            SHOTS.mkdir(parents=True, exist_ok=True)
            row.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "rebalancing-staged.png"), full_page=True)
    finally:
        cache.forget(topology.pk)
