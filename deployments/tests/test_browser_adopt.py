"""Adopt and release from the pages in a real Chromium against the sandbox; screenshots of each step."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
DATA = Path(__file__).resolve().parents[2] / "topologies" / "tests" / "data"


def test_adopt_page_lists_adopts_and_releases(page, live_server, operator, lab, lab_sandbox):
    namespace = f"b{uuid.uuid4().hex[:8]}"
    assert lab_sandbox.kubectl("create", "namespace", namespace).returncode == 0
    docs = [d for d in yaml.safe_load_all((DATA / "import-kthena-pd.yaml").read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    assert lab_sandbox.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs)).returncode == 0
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1366, "height": 900})
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", operator.username)
        page.fill("#id_password", "correct-horse-battery")
        page.click("button[type=submit]")
        page.goto(f"{live_server.url}/topologies/")
        page.click("text=Adopt running…")
        row = page.locator(f"tr[data-candidate='{namespace}/qwen-pd']")
        assert "ready to adopt" in row.inner_text()
        page.screenshot(path=str(SHOTS / "topologies-adopt.png"), full_page=True)
        row.locator("button:has-text('Adopt')").click()
        page.wait_for_url("**/topologies/*/")
        assert "revision 1 is what runs; no pod was restarted" in page.content()
        assert "running r1" in page.inner_text("h1")
        page.wait_for_selector("#deployments .pods-table")
        assert page.locator("#deployments .pods-table tbody tr").count() == 3
        page.screenshot(path=str(SHOTS / "topologies-adopted-detail.png"), full_page=True)
        page.click("summary:has-text('Release…')")
        page.click("button:has-text('Release qwen-pd')")
        page.wait_for_url("**/topologies/")
        assert "are the cluster's own again, unchanged" in page.content()
        page.screenshot(path=str(SHOTS / "topologies-released.png"), full_page=True)
    finally:
        lab_sandbox.kubectl("delete", "namespace", namespace, "--wait=false")
