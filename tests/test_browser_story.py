"""An operator's first week as one story, in a real browser against the sandbox cluster: import Kthena's
Ascend P/D example with a resource name no node offers, read why preflight blocks it, fix it in the
editor, deploy, deploy a broken image that is rolled back automatically, keep the running revision,
change the ratio, refuse then save the gateway settings, and verify. After every action its answer is
asserted inside the viewport where the person clicked (no scrolling); each step is shot at 1440 and
390 px to var/screenshots/story-<step>-<width>.png."""

from __future__ import annotations

import os
import re
import tempfile
import time
import uuid

import pytest
from playwright.sync_api import expect

from deployments.models import Deployment
from deployments.tests.sandbox_helpers import register
from gateway.tests.conftest import FALLBACK_MODEL, fallback_stack
from tests.support import ROOT, celery_worker, subprocess_env, uvicorn_server
from tests.test_browser_first_week import IN_VIEW, PHONE, SHOTS, WIDE, _login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
__all__ = ["fallback_stack"]
ASCEND = (
    ROOT.parent
    / "shared"
    / "reference"
    / "kthena"
    / "examples"
    / "model-serving__prefill-decode-disaggregation.yaml"
)
OFFERED = "huawei.com/ascend-1980"  # what the sandbox's nodes advertise
WRONG = "huawei.com/Ascend910"


def _seen(page, selector: str, text: str | re.Pattern[str] = "", timeout: float = 5_000) -> None:  # type: ignore[no-untyped-def]
    """``selector`` says ``text`` and lies wholly inside the viewport, where the page is now."""
    expect(page.locator(selector).first).to_contain_text(text, timeout=timeout)
    page.wait_for_function(
        f"sel => {{ const el = document.querySelector(sel); return !!el && ({IN_VIEW})(el); }}",
        arg=selector,
        timeout=5_000,
    )


def _shots(page, step: str, selector: str) -> None:  # type: ignore[no-untyped-def]
    """The step at the width it was taken, then on a phone with ``selector`` brought into sight."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"]
    page.screenshot(path=str(SHOTS / f"story-{step}-{width}.png"))
    other = PHONE if width != PHONE["width"] else WIDE
    page.set_viewport_size(other)
    page.locator(selector).first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"story-{step}-{other['width']}.png"))
    page.set_viewport_size(WIDE if other is PHONE else PHONE)


def test_an_operators_first_week_in_one_story(page, operator, sandbox_cluster, fallback_stack):
    if not ASCEND.is_file():
        pytest.fail(f"Kthena's Ascend example is expected at {ASCEND} (CI checks out ../shared)")
    cluster = register(sandbox_cluster)
    namespace = f"st{uuid.uuid4().hex[:8]}"
    yaml_text = (
        ASCEND.read_text().replace(OFFERED, WRONG).replace("namespace: dev", f"namespace: {namespace}")
    )
    env = subprocess_env(
        LOG_LEVEL="warning",
        DEPLOY_POLL_SECONDS="0.2",
        DEPLOY_FAIL_FAST_SECONDS="2",
        DEPLOY_READY_TIMEOUT_SECONDS="60",
    )
    log = tempfile.NamedTemporaryFile(prefix="story-worker-", suffix=".log")  # noqa: SIM115 - closed below
    marks: list[tuple[str, float]] = [("start", time.monotonic())]
    try:
        with (
            uvicorn_server(env) as base,
            celery_worker(env, queues="deploy,default", log_level="WARNING", output=log),
        ):
            _story(page, base, operator, cluster, yaml_text, fallback_stack, marks)
    except Exception:
        page.screenshot(path=str(SHOTS / "story-failure.png"))
        log.seek(0)
        print(log.read().decode(errors="replace")[-6000:])  # the worker's side, in pytest's captured output
        raise
    finally:
        log.close()
        sandbox_cluster.kubectl(
            "delete",
            "modelroutes,modelservers,modelservings,deployments,services",
            "--all",
            "-n",
            namespace,
            "--wait=false",
        )
        print(" ".join(f"{name} {at - marks[0][1]:.1f}s" for name, at in marks[1:]))


def _story(page, base, operator, cluster, yaml_text, fallback, marks):  # type: ignore[no-untyped-def]
    def mark(name: str) -> None:
        marks.append((name, time.monotonic()))

    _login(page, base, operator.username)

    # 1. Import Kthena's example with a resource name no sandbox node offers: the preview says so (on a
    # phone, where the result is furthest from the button).
    page.set_viewport_size(PHONE)
    page.goto(f"{base}/topologies/import/")
    page.fill("#import-yaml", yaml_text)
    page.select_option("#import-cluster", str(cluster.pk))
    page.click("button[value=preview]")
    _seen(page, "#import-verdict", "2 problems with the cluster's nodes")
    _seen(page, "#import-node-findings li", WRONG)
    expect(page.locator("#import-node-findings li").first).to_contain_text(OFFERED)
    _shots(page, "1-import-preview", "#import-node-findings")
    page.set_viewport_size(WIDE)
    page.click("button[value=create]")
    page.wait_for_url(re.compile(r".*/topologies/\d+/$"))
    _seen(page, ".messages .msg", "as revision 1")
    topology_url = page.url
    pk = int(topology_url.rstrip("/").rsplit("/", 1)[1])
    mark("import")

    # 2. Preflight names the blocking finding (on a phone: under a long summary); Deploy is disabled.
    page.set_viewport_size(PHONE)
    page.click("button:has-text('Run preflight')")
    _seen(page, "#detail-preflight .finding[data-code=accelerator_resource_unknown]", WRONG)
    _shots(page, "2-preflight-blocked", "#detail-preflight")
    page.set_viewport_size(WIDE)
    page.locator("[data-section-bar] a", has_text="Deployments").click()
    _seen(page, "#deployments [data-deploy-blocked] [data-code=accelerator_resource_unknown]", OFFERED)
    expect(page.locator("#deployments button[data-deploy]")).to_be_disabled()
    _shots(page, "2-deploy-blocked", "#deployments [data-deploy-blocked]")
    mark("blocked")

    # 3. The editor, on a phone: the resource the nodes offer (and the bounds the import left unset); its
    # live preflight, in sight while typing, passes.
    page.set_viewport_size(PHONE)
    page.click(".toolbar a:has-text('Edit')")
    for role in ("prefill", "decode"):
        page.fill(f'[name="roles.{role}.accelerator_resource"]', OFFERED)
    # (the form loads with its preflight blocked; what was typed passes)
    _seen(page, "#preflight-results .preflight-head", re.compile("Nothing blocks|warnings"))
    expect(page.locator("#preflight-results [data-code=accelerator_resource_unknown]")).to_have_count(0)
    _shots(page, "3-editor-preflight", "#preflight-results")
    for role in ("prefill", "decode"):
        page.fill(f'[name="rebalancing.{role}.min"]', "1")
        page.fill(f'[name="rebalancing.{role}.max"]', "2")
    page.fill('[name="rebalancing.accelerator_budget"]', "16")
    page.fill('[name="message"]', "the resource our nodes offer")
    page.set_viewport_size(WIDE)
    page.click("#topology-form button[type=submit]")
    page.wait_for_url(topology_url)
    _seen(page, ".messages .msg", "Saved revision 2")
    page.click("button:has-text('Run preflight')")
    _seen(page, "#detail-preflight .preflight-head", "")
    expect(page.locator("#detail-preflight .finding-error")).to_have_count(0)
    _shots(page, "3-preflight-passes", "#detail-preflight")
    mark("fixed")

    # 4. Deploy: the panel follows it to success.
    page.set_viewport_size(WIDE)
    page.goto(topology_url + "#deployments")
    deploy = page.locator("#deployments button[data-deploy]")
    expect(deploy).to_be_enabled()
    deploy.click()
    _seen(page, "#answer-deployments .msg", "Deploy of revision 2 queued")
    _seen(page, "#deployments .deploy-revs [data-rollout=in_sync]", "revision 2 is running", timeout=60_000)
    _seen(page, "#deployments .deploy-current [data-role=state]", "Succeeded")
    # The only other revision never ran: nothing is chosen for the person (and the box is never blank).
    expect(page.locator("#deployments select[name=revision] option:checked")).to_have_text(
        "choose a revision"
    )
    _shots(page, "4-deployed", "#deployments .deploy-current")
    mark("deployed")

    # 5. A broken image: the deploy fails and is rolled back automatically; the panel says so.
    page.click(".toolbar a:has-text('Edit')")
    image = page.locator('[name="image"]')
    good = image.input_value()
    broken = good + "-broken"
    image.fill(broken)
    page.fill('[name="message"]', "new engine build")
    page.click("#topology-form button[type=submit]")
    _seen(page, ".messages .msg", "Saved revision 3")
    page.goto(topology_url + "#deployments")
    page.locator("#deployments button[data-deploy]").click()
    _seen(page, "#answer-deployments .msg", "Deploy of revision 3 queued")
    _seen(
        page,
        "#deployments .deploy-current .alert-info",
        "Revision 3 failed, so Tandem returned to revision 2, which is running again",
        timeout=60_000,
    )
    expect(page.locator("#deployments .deploy-current .diagnosis").first).to_contain_text("cannot be pulled")
    _shots(page, "5-rolled-back", "#deployments .deploy-current")
    mark("rolled back")

    # 6. Rolling back: the safe choice (keep revision 2, the last that ran) is the default; the failed one
    # asks first and names what it deploys, and deploys nothing yet; keeping clears the problem.
    choice = page.locator("#deployments select[name=revision]")
    assert choice.input_value() == "keep"
    assert [o.inner_text() for o in choice.locator("option").all()] == [
        "revision 2 (running): keep it",
        "revision 3 (failed)",
        "revision 1 (never deployed)",
    ]
    expect(page.locator("#deployments [data-keep-running]")).to_contain_text(
        "Revision 3 is still the desired revision"
    )
    choice.select_option("3")
    page.click("#deployments >> button:has-text('Roll back…')")
    _seen(page, "[data-confirm=rollback]", "Deploy revision 3 in place of revision 2?")
    _seen(page, "[data-untested]", "Revision 3 never ran successfully")
    expect(page.locator("[data-image]")).to_have_text(broken)
    expect(page.locator("[data-differences]")).to_contain_text(f"image: {good} → {broken}")
    _shots(page, "6-rollback-confirm", "[data-untested]")
    page.set_viewport_size(PHONE)
    page.click("#rollback-confirm >> text=Cancel")
    page.locator("#deployments button:has-text('Roll back…')").click()  # the default: keep
    _seen(page, "[data-confirm=keep]", "Keep revision 2 running?")
    page.click("#rollback-confirm button:has-text('Keep revision 2')")
    _seen(page, "#answer-deployments .msg", "Kept revision 2 running; it is the desired revision again")
    _seen(
        page,
        "#deployments .deploy-revs [data-rollout=in_sync]",
        "revision 2 is running; deploy of revision 3 failed and was set aside",
    )
    expect(page.locator("#deployments [data-keep-running]")).to_have_count(0)
    assert [o.inner_text() for o in choice.locator("option").all()] == [
        "choose a revision",  # revision 2 runs; the others never ran: none is the default
        "revision 3 (failed)",
        "revision 1 (never deployed)",
    ]
    assert choice.input_value() == ""
    _shots(page, "6-kept", "#answer-deployments")
    assert (
        Deployment.objects.filter(topology_id=pk).count() == 2
    )  # neither the confirmation nor keeping deployed
    page.goto(f"{base}/")
    expect(page.locator(f"tr[data-topology-id='{pk}']")).to_have_attribute("data-rollout", "in_sync")
    page.goto(f"{base}/activity/")
    expect(page.locator("table")).to_contain_text("kept revision 2 running; revision 3 no longer desired")
    mark("kept")

    # 7. A ratio change from the Rebalancing panel.
    page.set_viewport_size(WIDE)
    page.goto(topology_url + "#rebalancing")
    page.fill("#rebalancing input[name=prefill]", "2")
    page.fill("#rebalancing input[name=decode]", "1")
    page.click("#rebalancing button:has-text('Set the ratio')")
    _seen(page, "#answer-rebalancing .msg", "to 2 prefill / 1 decode started")
    _shots(page, "7-ratio", "#answer-rebalancing")
    mark("ratio")

    # 8. Gateway settings with a mistake: refused in the panel with what was typed kept (never the key);
    # corrected: saved.
    page.set_viewport_size(WIDE)
    page.goto(topology_url)
    page.locator("[data-section-bar] a", has_text="Gateway").click()
    page.click("#gateway-settings > summary")
    page.fill("#gateway input[name=aliases]", "deepseek, ds-v2")
    page.fill("#gateway input[name=fallback_base_url]", f"{fallback.url}/v1/v1")
    page.fill("#gateway input[name=fallback_model]", FALLBACK_MODEL)
    page.fill("#gateway input[name=fallback_api_key]", "sk-typed-secret")
    page.click("button:has-text('Save gateway settings')")
    _seen(page, "#answer-gateway .msg", "Gateway settings not saved")
    expect(page.locator(".gateway-settings .field.has-error .field-error")).to_contain_text(
        f"use {fallback.url}/v1"
    )
    assert page.input_value("#gateway input[name=fallback_base_url]") == f"{fallback.url}/v1/v1"
    assert page.input_value("#gateway input[name=aliases]") == "deepseek, ds-v2"
    assert page.input_value("#gateway input[name=fallback_model]") == FALLBACK_MODEL
    assert page.input_value("#gateway input[name=fallback_api_key]") == ""  # a secret is never written back
    expect(page.locator("[data-key-not-kept]")).to_be_visible()
    assert "sk-typed-secret" not in page.content()
    _shots(page, "8-gateway-refused", "#answer-gateway")
    page.set_viewport_size(PHONE)
    page.fill("#gateway input[name=fallback_base_url]", f"{fallback.url}/v1")
    page.click("button:has-text('Save gateway settings')")
    _seen(page, "#answer-gateway .msg", "Gateway settings saved")
    _shots(page, "8-gateway-saved", "#answer-gateway")
    mark("gateway")

    # 9. Verify: the run and its result show in the panel.
    page.set_viewport_size(WIDE)
    page.goto(topology_url + "#gateway")
    for kind in ("prefix", "concurrency", "links", "fallback", "pd"):  # the smoke request alone: quick
        page.locator(f"#gateway input[name=kinds][value={kind}]").uncheck()
    page.locator("#gateway [data-role=verify]").click()
    _seen(page, "#gateway .probe-run[data-state=passed] [data-role=run-state]", "Passed", timeout=30_000)
    # No router Service exposes this Kthena topology in the sandbox: the fallback answered.
    _seen(page, "#gateway .probe-smoke", "200 from the fallback")
    _shots(page, "9-verified", "#gateway .probe-run")
    mark("verified")

    # The week in the revisions list: the ratio change runs; the broken build reads as failed, not unrun.
    revisions = page.locator("#revisions [data-live-part=revisions]")
    expect(revisions.locator("tr[data-revision='4'] [data-badge=running]")).to_be_visible(timeout=30_000)
    expect(revisions.locator("tr[data-revision='4']")).to_contain_text("scale prefill to 2 replicas")
    expect(revisions.locator("tr[data-revision='3'] [data-badge=failed]")).to_have_text("deploy failed")
    expect(revisions.locator("tr[data-revision='1'] [data-badge=never]")).to_have_text("never deployed")
