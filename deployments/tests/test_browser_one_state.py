"""After a deploy, a rollback and a failed deploy, every part of the topology page (header, summary,
revisions list, deployments card) names the same desired and running revision, without a reload; the
rollback choices leave out the running revision (unless it can be kept) and say which never ran.
Screenshots go to var/screenshots/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from deployments.tests.sandbox_helpers import Worker
from tests.support import subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _page_state(page) -> dict[str, str]:
    """What each part of the page says, read from the DOM as it is now."""
    head = page.inner_text("h1 [data-live-part=head-state]")
    summary_desired = page.inner_text("[data-live-part=summary] [data-rev=desired]")
    summary_running = page.inner_text("[data-live-part=summary] [data-rev=running]")
    card_desired = page.inner_text("#deployments [data-rev=desired]")
    card_running = page.inner_text("#deployments [data-rev=running]")
    desired_row = page.locator("[data-live-part=revisions] tr:has([data-badge=desired])").get_attribute(
        "data-revision"
    )
    running_rows = page.locator("[data-live-part=revisions] tr:has([data-badge=running])")
    running_row = running_rows.first.get_attribute("data-revision") if running_rows.count() else ""
    return {
        "head": head,
        "summary": f"{summary_desired}/{summary_running}",
        "card": f"{card_desired}/{card_running}",
        "rows": f"r{desired_row}/r{running_row}",
    }


def _rollback_choices(page) -> list[str]:
    return [o.inner_text() for o in page.locator("#deployments select[name=revision] option").all()]


def test_the_page_agrees_with_itself_after_deploy_rollback_and_failure(
    page, operator, new_topology, lab_sandbox
):
    from topologies.services import topology_update

    topology = new_topology()
    env = subprocess_env(DEPLOY_POLL_SECONDS="0.5", DEPLOY_FAIL_FAST_SECONDS="2", LOG_LEVEL="warning")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 1000})
    spec = dict(topology.spec)
    spec["roles"] = {**spec["roles"], "decode": {**spec["roles"]["decode"], "env": {"LOG_LEVEL": "debug"}}}
    topology_update(topology=topology, spec=spec, actor=operator, message="decode logs more")
    worker = Worker("onestate", DEPLOY_POLL_SECONDS="0.5", CELERY_VISIBILITY_TIMEOUT="3600")
    try:
        with uvicorn_server(env) as base:
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", operator.username)
            page.fill("#id_password", "correct-horse-battery")
            page.click("button[type=submit]")
            page.goto(f"{base}/topologies/{topology.pk}/")
            assert "not deployed" in page.inner_text("h1")
            # No revision ran yet: none is chosen for the person (never an unrun one by default).
            assert _rollback_choices(page) == [
                "choose a revision",
                "revision 2 (never deployed)",
                "revision 1 (never deployed)",
            ]

            page.click("#deployments >> text=Deploy revision 2")
            expect(page.locator("h1 [data-rollout]")).to_have_attribute(
                "data-rollout", "in_sync", timeout=60_000
            )
            state = _page_state(page)
            assert state == {
                "head": state["head"],
                "summary": "r2/r2",
                "card": "revision 2/revision 2",
                "rows": "r2/r2",
            }
            assert "running r2" in state["head"]
            assert _rollback_choices(page) == ["choose a revision", "revision 1 (never deployed)"]
            # The panel re-read after the deploy does not keep a choice it no longer offers (a blank box).
            expect(page.locator("#deployments select[name=revision] option:checked")).to_have_text(
                "choose a revision"
            )

            page.select_option("#deployments select[name=revision]", "1")
            page.click("#deployments >> button:has-text('Roll back')")
            # A confirmation names what it deploys before anything happens.
            expect(page.locator("[data-confirm=rollback]")).to_have_text(
                "Deploy revision 1 in place of revision 2?"
            )
            page.click("#rollback-confirm >> button:has-text('Deploy revision 1')")
            # The POST lands back on the page; from here on nothing reloads it.
            page.wait_for_selector("#deployments .deploy-current", timeout=10_000)
            expect(page.locator("[data-live-part=summary] [data-rev=running]")).to_have_text(
                "r1", timeout=60_000
            )
            expect(page.locator("h1 [data-rollout]")).to_have_attribute(
                "data-rollout", "in_sync", timeout=10_000
            )
            state = _page_state(page)
            assert state["summary"] == "r1/r1" and state["card"] == "revision 1/revision 1"
            assert state["rows"] == "r1/r1" and "running r1" in state["head"]
            assert _rollback_choices(page) == ["revision 2"]  # it ran once: no "never deployed"
            page.screenshot(path=str(SHOTS / "topology-after-rollback.png"), full_page=True)

            broken = dict(spec)
            broken["image"] = spec["image"] + "-broken"
            topology_update(topology=topology, spec=broken, actor=operator, message="broken build")
            page.reload()
            page.click("#deployments >> text=Deploy revision 3")
            expect(page.locator("h1 [data-rollout]")).to_have_attribute(
                "data-rollout", "failed", timeout=60_000
            )
            state = _page_state(page)
            assert state["summary"] == "r3/r1" and state["card"] == "revision 3/revision 1"
            assert state["rows"] == "r3/r1"
            assert "last deploy failed" in state["head"]
            assert _rollback_choices(page) == [
                "revision 1 (running): keep it",
                "revision 2",
                "revision 3 (failed)",
            ]
            page.screenshot(path=str(SHOTS / "topology-after-failed-deploy.png"), full_page=True)

            page.goto(f"{base}/")
            row = page.locator(f"tr[data-topology-id='{topology.pk}']")
            assert row.get_attribute("data-rollout") == "failed"
            assert "failed; revision 1 is running" in row.inner_text()
            assert int(page.inner_text("[data-problem-count]")) >= 1
            page.screenshot(path=str(SHOTS / "overview-failed-deploy.png"), full_page=True)

            page.goto(f"{base}/activity/")
            assert "rollback from revision 2 to revision 1" in page.inner_text("table")
            page.screenshot(path=str(SHOTS / "activity.png"), full_page=True)

            page.goto(f"{base}/topologies/{topology.pk}/")
            page.click("text=Delete…")
            page.fill("#confirm-name", "wrong")
            page.click("#delete-form button[type=submit]")
            assert "to confirm" in page.inner_text("#delete-error")
            page.screenshot(path=str(SHOTS / "topology-delete-confirm.png"), full_page=True)
            page.fill("#confirm-name", topology.name)
            page.click("#delete-form button[type=submit]")
            page.wait_for_url("**/topologies/removal/*/")
            expect(page.locator("#removal [data-role=done]")).to_be_visible(timeout=60_000)
            assert "Deleted topology" in page.inner_text("#removal [data-role=steps]")
            page.screenshot(path=str(SHOTS / "topology-removal.png"), full_page=True)
    except Exception:
        print("".join(worker.lines[-60:]))
        raise
    finally:
        worker.stop()
