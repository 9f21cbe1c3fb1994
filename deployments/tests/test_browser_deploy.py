"""An operator deploys from the topology page in a real Chromium: progress arrives over the websocket, the
panel turns green; drift is shown and re-applied; the deploy policy is saved; a viewer sees no deploy
buttons. Screenshots go to var/screenshots/. (A broken revision's diagnosis and automatic rollback are
part of tests/test_browser_story.py.)"""

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


def _off_the_loop(fn):
    """Run product code that sends websocket events outside Playwright's event-loop thread."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def call():
        try:
            return fn()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result()


def test_operator_deploys_and_sees_progress_diagnosis_and_rollback(
    page, operator, viewer, new_topology, lab_sandbox
):
    topology = new_topology()
    env = subprocess_env(DEPLOY_POLL_SECONDS="0.5", DEPLOY_FAIL_FAST_SECONDS="2", LOG_LEVEL="warning")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 1000})
    worker = Worker("browser", DEPLOY_POLL_SECONDS="0.5", CELERY_VISIBILITY_TIMEOUT="3600")
    try:
        _walk_through(page, env, operator, viewer, topology, lab_sandbox)
    except Exception:
        print("".join(worker.lines[-60:]))  # the worker's side of a failure, in pytest's captured output
        raise
    finally:
        worker.stop()


def _walk_through(page, env, operator, viewer, topology, lab_sandbox):
    from deployments.tasks import check_drift

    with uvicorn_server(env) as base:
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", operator.username)
        page.fill("#id_password", "correct-horse-battery")
        page.click("button[type=submit]")
        page.goto(f"{base}/topologies/{topology.pk}/")
        assert "Not deployed yet" in page.inner_text("#deployments")

        page.click("#deployments >> text=Deploy revision 1")
        page.wait_for_selector("#deployments .deploy-current .state-succeeded", timeout=60_000)
        # The finished deployment re-fetches the panel; pods may show earlier, so wait for what only it says.
        expect(page.locator("#deployments .deploy-revs")).to_contain_text(
            "Running revision 1", timeout=10_000
        )
        page.wait_for_selector("#deployments .pods-table", timeout=10_000)
        panel = page.inner_text("#deployments")
        assert "Running revision 1" in panel.replace("\n", " ")
        assert "2/2 pods ready" in panel
        assert page.locator("#deployments .pods-table tbody tr").count() == 2
        # The state line, the pod rows and the buttons agree: every pod Ready, nothing left to cancel.
        states = page.locator("#deployments .pods-table tbody tr td:nth-child(4)").all_inner_texts()
        assert states == ["Ready", "Ready"], states
        assert page.locator("#deployments form[action$='/cancel/']").count() == 0
        page.screenshot(path=str(SHOTS / "deployments-succeeded.png"), full_page=True)

        name = topology.current_revision.manifests[0]["metadata"]["name"]
        lab_sandbox.kubectl("scale", f"modelserving/{name}", "--replicas=2", "-n", topology.namespace)
        assert _off_the_loop(check_drift) == 1
        page.reload()
        banner = page.inner_text("#deployments .drift-banner")
        assert f"ModelServing/{name}: spec.replicas live 2, desired 1" in banner
        page.locator("#deployments").screenshot(path=str(SHOTS / "deployments-panel-drifted.png"))
        page.click("#deployments >> text=Re-apply revision 1")
        page.wait_for_selector("#deployments .deploy-revs .state-in_sync", timeout=60_000)
        assert page.locator("#deployments .drift-banner").count() == 0

        page.fill("#deployments input[name=ready_timeout_seconds]", "120")
        page.select_option("#deployments select[name=auto_rollback]", "off")
        page.click("#deployments >> text=Save policy")
        expect(page.locator("#answer-deployments")).to_contain_text("ready timeout 120 s, auto-rollback off")
        revs = page.inner_text("#deployments .deploy-revs")
        assert "Ready timeout 120 s" in revs and "auto-rollback off" in revs
        page.locator("#deployments .deploy-actions").screenshot(
            path=str(SHOTS / "deployments-policy-form.png")
        )

        page.goto(f"{base}/accounts/login/")
        page.context.clear_cookies()
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", viewer.username)
        page.fill("#id_password", "correct-horse-battery")
        page.click("button[type=submit]")
        page.goto(f"{base}/topologies/{topology.pk}/")
        assert page.locator("#deployments >> text=Deploy revision").count() == 0
        assert "Running revision 1" in page.inner_text("#deployments .deploy-revs").replace("\n", " ")
