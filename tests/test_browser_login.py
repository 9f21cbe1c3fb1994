"""A person logs in with a real browser and sees the overview, live indicator and all."""

from __future__ import annotations

import re
import threading

import pytest
from django.contrib.auth.hashers import make_password

from accounts.models import User
from controlplane.tasks import heartbeat
from tests.support import ROOT, subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = ROOT / "var" / "screenshots"
PASSWORD = "a-long-browser-password"


@pytest.fixture
def server():
    with uvicorn_server(subprocess_env()) as base:
        yield base


def test_admin_logs_in_sees_the_overview_and_the_live_indicator(page, server):
    User.objects.create(username="ada", role="admin", password=make_password(PASSWORD))
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.set_viewport_size({"width": 1366, "height": 800})

    page.goto(server + "/")
    assert "/accounts/login/" in page.url
    page.screenshot(path=str(SHOTS / "login.png"))
    page.fill("#id_username", "ada")
    page.fill("#id_password", "wrong password")
    page.click("button[type=submit]")
    assert (
        page.locator(".alert-error").inner_text().startswith("Please enter a correct username and password")
    )
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(server + "/")
    assert page.locator("h1").first.inner_text() == "Overview"
    assert page.locator(".nav a[aria-current=page]").inner_text() == "Overview"
    assert page.locator(".nav a", has_text="Users").count() == 1  # admins manage users

    indicator = page.locator("#live-indicator")
    page.wait_for_selector("#live-indicator:not([data-state=connecting])")
    # What beat enqueues every few seconds, sent through the real channel layer; its own thread,
    # because Playwright keeps an event loop running in this one.
    sender = threading.Thread(target=heartbeat)
    sender.start()
    sender.join()
    page.wait_for_selector("#live-indicator[data-state=live]", timeout=10000)
    assert indicator.inner_text() == "live"
    page.screenshot(path=str(SHOTS / "overview.png"))

    page.click(".nav a:has-text('Activity')")
    page.wait_for_url(re.compile(r".*/activity/$"))
    assert page.locator("td code", has_text="auth.login").count() >= 1
    assert page.locator("td code", has_text="auth.login_failed").count() == 1
    page.screenshot(path=str(SHOTS / "activity.png"))

    page.click(".nav a:has-text('Users')")
    page.wait_for_url(re.compile(r".*/accounts/users/$"))
    page.screenshot(path=str(SHOTS / "users.png"))
    page.fill("#id_username", "bob")
    page.select_option("#id_role", "operator")
    page.fill("#id_password", "short")
    page.click("button:has-text('Add user')")
    assert "Choose a longer, less common password." in page.locator(".field-error").first.inner_text()
    page.fill("#id_password", "a-long-operator-password")
    page.click("button:has-text('Add user')")
    assert page.locator(".msg-success").inner_text() == "User bob created as operator."
    page.click("table a:has-text('bob')")
    page.wait_for_url(re.compile(r".*/accounts/users/\d+/$"))
    page.screenshot(path=str(SHOTS / "user-edit.png"))

    page.goto(server + "/api/v1/docs/")
    page.wait_for_selector(".swagger-ui .information-container", timeout=15000)
    page.screenshot(path=str(SHOTS / "api-docs.png"))

    page.goto(server + "/")
    page.click("button.link:has-text('Log out')")
    page.wait_for_url(re.compile(r".*/accounts/login/$"))
    assert not problems, f"browser console errors (CSP violations show here): {problems}"


def test_viewer_sees_no_admin_navigation(page, server):
    User.objects.create(username="vic", role="viewer", password=make_password(PASSWORD))
    page.goto(server + "/accounts/login/")
    page.fill("#id_username", "vic")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(server + "/")
    assert page.locator(".nav a", has_text="Users").count() == 0
    response = page.goto(server + "/accounts/users/")
    assert response is not None and response.status == 403
