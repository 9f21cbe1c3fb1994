"""Error pages: pages answer the project's 403/404/500 pages saying what happened and what to do next;
API paths keep answering the one JSON error shape."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.urls import include, path

from controlplane import views as controlplane_views


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret-detail-do-not-show")


def _forbidden(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied("This page needs the operator role.")


# A root URLconf for these tests alone: the project's pages plus views that fail on purpose.
urlpatterns = [
    path("boom/", _boom),
    path("api/v1/boom/", _boom),
    path("forbidden/", _forbidden),
    path("", include("controlplane.urls")),
]
handler404 = "controlplane.views.not_found"
handler500 = "controlplane.views.server_error"


def test_unknown_page_shows_the_404_page_with_where_to_go(client, viewer):
    client.force_login(viewer)
    response = client.get("/no/such/page/")
    body = response.content.decode()
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
    assert "Page not found" in body and "/no/such/page/" in body
    assert 'href="/"' in body and "Overview" in body
    assert "css/tandem.css" in body and 'class="topbar"' in body


def test_unknown_page_asks_an_anonymous_visitor_to_log_in(client, db):
    body = client.get("/no/such/page/").content.decode()
    assert "Page not found" in body and "/accounts/login/" in body


def test_unknown_api_path_still_answers_json(api_client, viewer):
    api_client.force_authenticate(viewer)
    response = api_client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_operator_page_tells_a_viewer_the_role_and_to_ask_an_admin(client, viewer, topology_id):
    client.force_login(viewer)
    response = client.post(f"/deployments/topology/{topology_id}/deploy/")
    body = response.content.decode()
    assert response.status_code == 403
    assert "This page needs the operator role." in body
    assert "with the <strong>viewer</strong> role" in body and "Ask an admin" in body


@pytest.mark.urls(__name__)
def test_page_failure_shows_the_500_page_without_details(client, viewer):
    client.raise_request_exception = False
    client.force_login(viewer)
    response = client.get("/boom/")
    body = response.content.decode()
    assert response.status_code == 500 and response["Content-Type"].startswith("text/html")
    assert "Something went wrong on the server" in body and "Try again" in body
    assert "secret-detail-do-not-show" not in body and "css/tandem.css" in body


@pytest.mark.urls(__name__)
def test_api_failure_keeps_the_json_error_shape(client, viewer):
    client.raise_request_exception = False
    client.force_login(viewer)
    response = client.get("/api/v1/boom/")
    assert response.status_code == 500 and response.json()["error"]["code"] == "server_error"
    assert "secret-detail-do-not-show" not in response.content.decode()


@pytest.mark.urls(__name__)
def test_permission_denied_on_a_page_uses_the_403_page(client, db):
    body = client.get("/forbidden/").content.decode()
    assert "Not allowed" in body and "This page needs the operator role." in body and "Log in" in body


def test_500_page_renders_without_request_context_or_database():
    # No django_db mark: any database access while rendering would fail this test.
    response = controlplane_views.server_error(RequestFactory().get("/topologies/1/"))
    body = response.content.decode()
    assert response.status_code == 500 and "Something went wrong on the server" in body
    assert 'href="/"' in body


@pytest.fixture
def topology_id(db, admin_user):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    return topology_create(cluster=cluster, spec=preset_spec("deepseek-ascend-mooncake"), actor=admin_user).pk


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_error_pages_in_a_browser(page, live_server, client, viewer):
    """A viewer opening an operator page and a missing page sees styled pages saying what to do next."""
    import os
    from pathlib import Path

    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    shots = Path(__file__).resolve().parents[1] / "var" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    client.force_login(viewer)
    session = client.cookies["sessionid"].value
    page.context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
    page.set_viewport_size({"width": 1280, "height": 720})

    response = page.goto(f"{live_server.url}/no/such/page/")
    assert response is not None and response.status == 404
    assert page.locator("h1").inner_text() == "Page not found"
    assert page.locator(".topbar .role-badge").inner_text() == "viewer"
    page.screenshot(path=str(shots / "error-404.png"))

    response = page.goto(f"{live_server.url}/topologies/new/")
    assert response is not None and response.status == 403
    assert page.locator("h1").inner_text() == "Not allowed"
    text = page.locator(".error-page").inner_text()
    assert "This page needs the operator role." in text and "viewer role" in text and "Ask an admin" in text
    page.screenshot(path=str(shots / "error-403.png"))
