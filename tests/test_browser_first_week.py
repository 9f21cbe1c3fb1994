"""An operator's first week, in a real browser: the panel actions of the topology page answer inside
their panel, in the viewport where the person clicked (no scrolling), a refused form keeps what was
typed, the section bar reaches every section, and at 390 px no main page is wider than the screen.
(The gateway settings, deploy, rollback and verify answers are walked in tests/test_browser_story.py.)
Also: a viewer is told the pages are read-only, a 3 MB paste into Import is stopped with the YAML kept,
and Activity shows and filters in one time zone (the browser's, here Asia/Kolkata, UTC+05:30).
Screenshots of every page touched, at 1440 and 390 px, go to var/screenshots/first-week-*.png."""

from __future__ import annotations

import os
import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.support import ROOT, subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = ROOT / "var" / "screenshots"
WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}

# Wholly inside the viewport: what a person sees without scrolling.
IN_VIEW = """el => { const r = el.getBoundingClientRect();
  return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0
    && r.right <= window.innerWidth; }"""


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):  # type: ignore[no-untyped-def]
    return {**browser_context_args, "timezone_id": "Asia/Kolkata"}


def _login(page, base: str, username: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def _shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"first-week-{name}.png"))


def _answer_in_view(page, panel: str, text: str) -> None:  # type: ignore[no-untyped-def]
    """After the redirect, the panel's answer is on screen where the page landed: no scrolling."""
    answer = page.locator(f"#answer-{panel} .msg")
    expect(answer).to_contain_text(text)
    page.wait_for_function(
        f"() => ({IN_VIEW})(document.querySelector('#answer-{panel} .msg'))", timeout=5_000
    )


def _page_width(page) -> int:  # type: ignore[no-untyped-def]
    return int(page.evaluate("document.documentElement.scrollWidth"))


@pytest.fixture
def deployed(sandbox_cluster, operator, settings):  # type: ignore[no-untyped-def]
    """A topology running in the shared sandbox (its own namespace, removed afterwards)."""
    from deployments.tests.sandbox_helpers import deploy_now, register
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    settings.DEPLOY_POLL_SECONDS = 0.2
    settings.DEPLOY_FAIL_FAST_SECONDS = 2
    namespace = f"fw{uuid.uuid4().hex[:8]}"
    spec = preset_spec("deepseek-ascend-mooncake", namespace=namespace)
    topology = topology_create(cluster=register(sandbox_cluster), spec=spec, actor=operator)
    job = deploy_now(topology, operator)
    assert job.state == "succeeded", (job.error, job.diagnosis)
    yield topology
    sandbox_cluster.kubectl(
        "delete",
        "modelroutes,modelservers,modelservings,deployments,services",
        "--all",
        "-n",
        namespace,
        "--wait=false",
    )


def test_panel_answers_in_view_kept_input_and_a_phone_sized_page(page, deployed, operator, viewer):
    from datetime import timedelta

    from django.utils import timezone

    from gateway.services import route_update
    from keys.services import key_create

    topology = deployed
    key_create(
        actor=operator, name="laptop-debug", purpose="debug", expires_at=timezone.now() + timedelta(days=7)
    )
    url = f"/topologies/{topology.pk}/"
    with uvicorn_server(subprocess_env(LOG_LEVEL="warning")) as base:
        _login(page, base, operator.username)
        page.set_viewport_size(WIDE)
        page.goto(base + url)
        # The section bar reaches every section directly.
        bar = page.locator("[data-section-bar]")
        assert bar.locator("a").all_inner_texts() == [
            "Summary",
            "Deployments",
            "Live",
            "Rebalancing",
            "Gateway",
            "SLOs",
            "Hit rate",
            "Revisions",
            "Manifests",
        ]
        bar.locator("a", has_text="Gateway").click()
        page.wait_for_function(f"() => ({IN_VIEW})(document.querySelector('#gateway h2'))")
        expect(bar).to_be_in_viewport()  # sticky: still there to go elsewhere
        _shot(page, "topology-1440")

        # Rebalancing: labels in words, the pod is chosen (no free text), refused values stay.
        forms = page.locator("#rebalancing .rebalance-forms")
        assert "minRatio" not in forms.inner_text()
        expect(forms.locator("label", has_text="Lowest prefill : decode ratio")).to_have_count(1)
        assert forms.locator("select[name=instance]").count() == 1
        assert forms.locator("input[name=instance]").count() == 0
        page.select_option("select[name=mode]", "advisory")
        page.fill("input[name=min_ratio]", "2")
        page.fill("input[name=max_ratio]", "1")
        page.click("button:has-text('Save planner')")
        page.wait_for_url(re.compile(r".*#answer-rebalancing$"))
        _answer_in_view(page, "rebalancing", "Planner not changed")
        answer_text = page.locator("#answer-rebalancing").inner_text()
        assert "minRatio" not in answer_text and "`" not in answer_text and "['" not in answer_text
        assert page.input_value("input[name=min_ratio]") == "2"
        assert page.input_value("input[name=max_ratio]") == "1"
        assert page.input_value("select[name=mode]") == "advisory"
        _shot(page, "rebalancing-error-1440")
        page.fill("input[name=min_ratio]", "0.5")
        page.fill("input[name=max_ratio]", "2")
        page.click("button:has-text('Save planner')")
        _answer_in_view(page, "rebalancing", "Planner saved: Advisory")
        page.wait_for_timeout(2_300)  # the planner is on: the panel's status re-reads every 2 s
        _answer_in_view(page, "rebalancing", "Planner saved: Advisory")  # ...and the answer stays
        assert page.input_value("input[name=min_ratio]") == "0.5"

        # Switch one pod's role: the pod is chosen from those running, and the answer is in the panel.
        pods = page.locator("select[name=instance] option").all_inner_texts()
        assert pods and all("(serves " in p for p in pods), pods
        page.select_option("select[name=instance]", index=len(pods) - 1)
        serving = pods[-1].rsplit("(serves ", 1)[1].rstrip(")")
        other = "decode" if serving == "prefill" else "prefill"
        assert page.input_value("select[name=target_role]") == other  # the other role is proposed
        page.click("button:has-text('Switch role')")
        page.wait_for_url(re.compile(r".*#answer-rebalancing$"))
        _answer_in_view(page, "rebalancing", "")  # 1P/1D: refused by the bounds, in words
        expect(page.locator("#answer-rebalancing")).to_have_text(
            re.compile(r"^(Switch #\d+ started|Not switched: )")
        )
        _shot(page, "switch-answer-1440")

        # Set the ratio: started, or refused (a switch runs) with the numbers kept.
        page.fill("input[name=prefill]", "2")
        page.click("button:has-text('Set the ratio')")
        _answer_in_view(page, "rebalancing", "")
        if "not changed" in page.locator("#answer-rebalancing").inner_text():
            assert page.input_value("input[name=prefill]") == "2"

        # The deployments panel: its answer is under the panel's head (its state), in view.
        page.fill("#deployments input[name=ready_timeout_seconds]", "120")
        page.click("#deployments button:has-text('Save policy')")
        page.wait_for_url(re.compile(r".*#deployments$"))
        _answer_in_view(page, "deployments", "Deploy policy saved: ready timeout 120 s")
        deploy = page.locator("#deployments button[data-deploy]")
        if deploy.is_enabled():
            deploy.click()
            page.wait_for_url(re.compile(r".*#deployments$"))
            _answer_in_view(page, "deployments", "")
        _shot(page, "deploy-answer-1440")

        # A phone: the page is the screen's width, the nav is reachable, the answers still land in view,
        # long unbroken words included (the router's in-cluster address, once discovered, is one).
        route_update(
            topology=topology,
            changes={
                "endpoint_url": f"http://{topology.name}-router.tandem-first-week-of-a-team.svc.cluster.local:8000"
            },
            actor=operator,
        )
        page.set_viewport_size(PHONE)
        page.goto(base + url)
        assert _page_width(page) <= 390
        for item in ("Keys", "Activity"):
            expect(page.locator(".nav a", has_text=item)).to_be_in_viewport()
        expect(page.locator("button:has-text('Log out')")).to_be_in_viewport()
        _shot(page, "topology-390")
        page.locator("[data-section-bar] a", has_text="Rebalancing").click()
        page.wait_for_function(f"() => ({IN_VIEW})(document.querySelector('#rebalancing h2'))")
        _shot(page, "rebalancing-390")

        # Every main page fits the phone; tables scroll inside their card.
        for path, name in (
            ("/", "overview"),
            ("/clusters/", "clusters"),
            ("/keys/", "keys"),
            ("/activity/", "activity"),
            ("/topologies/", "topologies"),
        ):
            for size, suffix in ((PHONE, "390"), (WIDE, "1440")):
                page.set_viewport_size(size)
                page.goto(base + path)
                if size is PHONE:
                    assert _page_width(page) <= 390, f"{path} is {_page_width(page)} px wide on a phone"
                if path == "/keys/":
                    expect(page.locator(".keys-table")).to_contain_text("expires in 7 days")
                _shot(page, f"{name}-{suffix}")

        # Activity: shown and filtered in the browser's zone (Asia/Kolkata), sent to the server as UTC.
        page.goto(base + "/activity/")
        # (Chromium names the zone Asia/Calcutta, ICU's canonical name.)
        expect(page.locator("th [data-tz-name]")).to_have_text("(your time, UTC+05:30)")
        expect(page.locator("label [data-tz-name]").first).to_have_text(
            re.compile(r"\(your time, Asia/\w+, UTC\+05:30\)")
        )
        page.fill("input[name=since]", "2026-01-31T14:00")
        page.click("form.filters button:has-text('Filter')")
        page.wait_for_url(re.compile(r".*since=2026-01-31T08%3A30%3A00Z.*"))
        assert page.input_value("input[name=since]") == "2026-01-31T14:00"

        # A 3 MB paste into Import is stopped in the page; the YAML stays.
        page.set_viewport_size(WIDE)
        page.goto(base + "/topologies/import/")
        big = ("# " + "x" * 1_000 + "\n") * 3_000  # 3 MB
        page.evaluate("text => { document.querySelector('#import-yaml').value = text; }", big)
        page.locator("#import-form button[type=submit]").first.click()
        note = page.locator("[data-too-large]")
        expect(note).to_contain_text("Not sent")
        expect(note).to_be_in_viewport()
        assert page.evaluate("document.querySelector('#import-yaml').value.length") == len(big)
        assert page.url.endswith("/topologies/import/")
        _shot(page, "import-too-large-1440")

        # The Problems card is red when it counts something (the topology is not deployed: not a
        # problem), so here it is calm; a viewer is told the pages are read-only.
        page.goto(base + "/")
        tile = page.locator("[data-problems-tile]")
        count = int(tile.locator("[data-problem-count]").inner_text())
        assert ("kpi-violated" in (tile.get_attribute("class") or "")) == (count > 0)
        page.click("button:has-text('Log out')")
        _login(page, base, viewer.username)
        expect(page.locator("[data-readonly-hint]")).to_contain_text("Read-only")
        page.goto(base + url)
        expect(page.locator("[data-readonly-hint]")).to_be_in_viewport()
        _shot(page, "viewer-topology-1440")
        page.set_viewport_size(PHONE)
        page.goto(base + url)
        assert _page_width(page) <= 390
        _shot(page, "viewer-topology-390")
