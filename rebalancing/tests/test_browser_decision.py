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


def test_a_paused_auto_planner_names_the_other_owners_and_what_to_do(page, make_topology, operator):
    from django.utils import timezone

    from rebalancing.models import PlannerConfig

    topology = make_topology(budget=4)
    kubectl = (
        "kubectl changed ModelServing default/llama spec.replicas 1 → 2 (prefill 1 → 2; decode 1 → 2; Update "
        "via /scale at 2026-12-03T11:02:11Z)"
    )
    remedy = (
        "set the split in Tandem instead (Set the ratio), stop whatever keeps scaling it, then set the "
        "planner to auto again to resume"
    )
    others = [
        {
            "kind": "field_manager",
            "name": "kubectl",
            "roles": ["prefill", "decode"],
            "message": kubectl,
            "remedy": remedy,
            "blocking": True,
            "handoff": "",
            "change": {"prefill": [1, 2], "decode": [1, 2]},
        },
        {
            "kind": "kthena_policy",
            "name": "AutoscalingPolicy default/llama-pd",
            "roles": ["prefill", "decode"],
            "message": "Kthena AutoscalingPolicy default/llama-pd scales the prefill and decode replicas "
            "(ModelServing default/llama)",
            "remedy": "hand Tandem's ratio bounds to its ratioConstraint (Hand over to Kthena: Tandem writes "
            "minRatio/maxRatio there and stays advisory), or delete the policy",
            "blocking": True,
            "handoff": "llama-pd",
            "change": {},
        },
        {
            "kind": "argocd",
            "name": "Argo CD Application llama-app",
            "roles": ["prefill", "decode"],
            "message": "Argo CD Application llama-app manages ModelServing default/llama "
            "(argocd.argoproj.io/tracking-id), but not its replica fields",
            "remedy": "a sync that sets them again would pause auto mode",
            "blocking": False,
            "handoff": "",
            "change": {},
        },
    ]
    reason = "; ".join(f"{o['message']}: {o['remedy']}" for o in others if o["blocking"])
    PlannerConfig.objects.create(
        topology=topology,
        mode=PlannerMode.AUTO,
        min_ratio=0.5,
        max_ratio=2,
        paused_reason=reason,
        paused_at=timezone.now(),
        other_owners=others,
    )
    Decision.objects.create(
        topology=topology,
        mode=PlannerMode.AUTO,
        rule="other_owner",
        action="pause",
        from_prefill=1,
        from_decode=1,
        to_prefill=1,
        to_decode=1,
        explanation=f"auto paused: {reason}",
        outcome=Outcome.PAUSED,
        outcome_detail="another owner of the replicas: kubectl, AutoscalingPolicy default/llama-pd",
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 1100})
    with uvicorn_server(subprocess_env()) as base:
        _login(page, base, operator)
        page.goto(f"{base}/topologies/{topology.pk}/")
        paused = page.locator('#rebalancing [data-owners="paused"]')
        text = paused.inner_text()
        assert text.startswith("Auto mode paused at ") and kubectl in text and remedy in text, text
        assert page.locator("#rebalancing [data-planner-mode]").inner_text() == "Auto (act): paused"
        assert page.locator('#rebalancing [data-owners="notes"] li[data-owner="argocd"]').count() == 1
        handoff = paused.locator('form[data-form="handoff"] button')
        assert "write P:D 0.5–2 into llama-pd's ratioConstraint" in handoff.inner_text()
        assert handoff.is_enabled()
        row = page.locator('#rebalancing tr[data-rule="other_owner"]')
        assert "Auto paused (another owner of the replicas)" in row.inner_text()
        assert "1P/1D → 1P/1D" not in row.inner_text()
        panel = page.locator("#rebalancing")
        for width in (1440, 390):  # the same page, reflowed to a phone's width
            page.set_viewport_size({"width": width, "height": 1100})
            panel.scroll_into_view_if_needed()
            panel.screenshot(path=str(SHOTS / f"rebalancing-paused-{width}.png"))
