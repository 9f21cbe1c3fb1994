"""What a person sees: a second topology serving the same model name on the same Kthena router cannot be
deployed until the operator gives a reason, and its panel says which topology the gateway serves; ratio
changes fold in the revisions list and a rollback says it undoes them. Each answer is asserted in the
viewport where the action was taken, at 1440 px and 390 px; screenshots go to var/screenshots/.
(Keeping the running revision after an automatic rollback is part of tests/test_browser_story.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from deployments import runner
from deployments.models import Deployment, State
from deployments.tests.sandbox_helpers import deploy_now
from tests.support import subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


def _login(page, base: str, user) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")


def _into_view(locator) -> None:  # type: ignore[no-untyped-def]
    """Scroll to it; the panel may be swapped for a fresh copy as its live socket connects, so retry."""
    for attempt in range(5):
        try:
            locator.scroll_into_view_if_needed(timeout=2_000)
            return
        except Exception:
            if attempt == 4:
                raise


def _shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name))


def test_a_second_topology_with_the_same_model_name_waits_for_a_reason(
    page, operator, new_topology, lab_sandbox, fast_deploys
):
    demo = new_topology(name="demo")
    assert deploy_now(demo, operator).state == State.SUCCEEDED
    imported = new_topology(name="imported")
    model = imported.spec["routing"]["model_name"]
    env = subprocess_env(LOG_LEVEL="warning")
    with uvicorn_server(env) as base:
        _login(page, base, operator)
        for size, suffix in ((WIDE, "1440"), (PHONE, "390")):
            page.set_viewport_size(size)
            page.goto(f"{base}/topologies/{imported.pk}/#deployments")
            deploy = page.locator("#deployments button[data-deploy]")
            expect(deploy).to_be_disabled()
            blocked = page.locator("#deployments [data-deploy-blocked]")
            _into_view(blocked)
            expect(blocked).to_be_in_viewport()
            finding = blocked.locator("[data-code=model_name_taken]")
            expect(finding).to_contain_text(
                f"topology demo ({demo.cluster.name}, namespace {demo.namespace}) already serves model "
                f"{model} through the Kthena router of cluster {demo.cluster.name}"
            )
            expect(finding).to_contain_text("Fix: give this topology another model name")
            _shot(page, f"deploy-blocked-model-name-{suffix}.png")

        page.set_viewport_size(WIDE)
        page.goto(f"{base}/topologies/{imported.pk}/#deployments")
        page.click("#deployments >> text=Deploy anyway…")
        override = page.locator("#deployments input[name=override_preflight]")
        expect(override).to_be_in_viewport()
        page.click("#deployments >> button:has-text('despite preflight')")  # empty: the browser asks for it
        assert not Deployment.objects.filter(topology=imported).exists()
        override.fill("demo is removed in the same window")
        page.click("#deployments >> button:has-text('despite preflight')")
        queued = page.locator("#deployments .deploy-current")
        expect(queued).to_be_in_viewport()
        expect(queued).to_contain_text("Deploy of revision 1")
        job = Deployment.objects.get(topology=imported)
        assert job.params == {"preflight_override": "demo is removed in the same window"}
        assert runner.run(job.pk, worker="test-worker") == "claimed"
        job.refresh_from_db()
        assert job.state == State.SUCCEEDED, (job.error, job.diagnosis)
        assert any("deploying anyway, as operator-user chose" in s.message for s in job.steps.all())

        page.goto(f"{base}/topologies/{imported.pk}/#deployments")
        sharing = page.locator("#deployments [data-sharing]")
        expect(sharing).to_have_attribute("data-sharing", "served-elsewhere")
        _into_view(sharing)
        expect(sharing).to_be_in_viewport()
        expect(sharing).to_contain_text(f"The gateway sends {imported.model_name} to topology demo")
        _shot(page, "model-name-served-elsewhere-1440.png")
        page.set_viewport_size(PHONE)
        page.goto(f"{base}/topologies/{demo.pk}/#deployments")
        expect(page.locator("#deployments [data-sharing]")).to_have_attribute("data-sharing", "served-here")
        _shot(page, "model-name-served-here-390.png")
        page.goto(f"{base}/activity/")
        expect(page.locator("table")).to_contain_text(
            "deploy of revision 1 despite preflight: demo is removed in the same window"
        )


def test_ratio_changes_are_folded_and_a_rollback_says_it_undoes_them(
    page, operator, new_topology, lab_sandbox, fast_deploys
):
    from topologies.services import topology_update

    topology = new_topology()
    assert deploy_now(topology, operator).state == State.SUCCEEDED  # r1 1P/1D
    for prefill, decode in ((2, 1), (2, 2), (1, 2)):  # r2..r4: ratio moves, each deployed
        spec = dict(topology.spec)
        spec["roles"] = {
            "prefill": {**spec["roles"]["prefill"], "replicas": prefill},
            "decode": {**spec["roles"]["decode"], "replicas": decode},
        }
        topology = topology_update(topology=topology, spec=spec, actor=operator, message="scale")
        job = deploy_now(topology, operator, kind="scale")
        assert job.state == State.SUCCEEDED, (job.error, job.diagnosis)
    env = subprocess_env(LOG_LEVEL="warning")
    with uvicorn_server(env) as base:
        _login(page, base, operator)
        for size, suffix in ((WIDE, "1440"), (PHONE, "390")):
            page.set_viewport_size(size)
            page.goto(f"{base}/topologies/{topology.pk}/#revisions")
            rows = page.locator("#revisions [data-live-part=revisions] tr")
            expect(page.locator("#revisions tr[data-revision='2']")).to_be_hidden()
            # r3 and r2 are folded behind r4, the newest of the run (running, so always shown)
            assert [r.get_attribute("data-revision") for r in rows.all() if r.is_visible()] == ["4", "1"]
            toggle = page.locator("#revisions label[data-folded]")
            expect(toggle).to_be_in_viewport()
            expect(toggle).to_have_text(
                "Show 2 folded ratio changes (scale and rebalancing: replica counts only)"
            )
            _shot(page, f"revisions-folded-{suffix}.png")
            toggle.click()
            expect(page.locator("#revisions tr[data-revision='2']")).to_be_visible()
            expect(page.locator("#revisions tr[data-revision='3']")).to_contain_text("ratio 2P/2D")

            page.goto(f"{base}/topologies/{topology.pk}/#deployments")
            choice = page.locator("#deployments select[name=revision]")
            options = [o.inner_text() for o in choice.locator("option").all()]
            assert options == ["revision 3 (ratio 2P/2D) +1 ratio change", "revision 1"]
            assert choice.input_value() == "3"  # the newest that ran
            choice.select_option("1")
            page.click("#deployments >> button:has-text('Roll back…')")
            ratio = page.locator("[data-differences] li.ratio-change")
            expect(ratio).to_be_in_viewport()
            expect(ratio).to_have_text(
                "P:D ratio 1P/2D → 1P/1D: this undoes the ratio change made since (scale or rebalancing)"
            )
            _shot(page, f"rollback-confirm-ratio-{suffix}.png")
