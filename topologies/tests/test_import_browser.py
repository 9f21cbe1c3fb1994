"""Import and export in a real Chromium: paste Kthena YAML, read the preview, create, copy the manifests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
DATA = Path(__file__).parent / "data"


def test_paste_preview_create_and_export(page, live_server, operator, cluster):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")

    page.goto(f"{live_server.url}/topologies/")
    page.click("text=Import YAML")
    page.fill("#import-yaml", (DATA / "import-kthena-pd.yaml").read_text())
    page.click("button[value=preview]")
    page.wait_for_selector("#import-result")
    assert "init container downloader" in page.inner_text('[data-kind="verbatim"]')  # carried, as given
    assert "--max-model-len 8192" in page.inner_text('[data-kind="verbatim"]')
    verdict = page.inner_text("#import-verdict")  # not a green "valid" over what changes or is missing
    assert "4 fields change" in verdict and "4 values need an answer" in verdict, verdict
    assert int(page.inner_text("#count-questions")) == 4
    assert "slo.ttft_ms" in page.inner_text('[data-kind="questions"]')
    page.screenshot(path=str(SHOTS / "topologies-import-preview.png"), full_page=True)

    page.click("button[value=create]")
    page.wait_for_url("**/topologies/*/")
    assert "Imported qwen-pd as revision 1" in page.content()
    page.click("summary:has-text('Manifests of r1')")
    assert "kind: ModelServing" in page.inner_text("#manifests-yaml")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("button[data-copy=manifests-yaml]")
    page.wait_for_selector("button[data-copy=manifests-yaml]:has-text('Copied')")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("apiVersion:") and "kind: ModelRoute" in copied
    page.screenshot(path=str(SHOTS / "topologies-detail-export.png"), full_page=True)
