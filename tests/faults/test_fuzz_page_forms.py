"""Property-based fuzz of the pages' form POSTs, as an admin: no posted form gets a 5xx.

Routes come from the URL conf (everything outside /api/, /admin/ and /v1/), field names and sample
values from the forms the pages themselves render, so new pages and fields are covered without
being listed. FUZZ_PAGE_EXAMPLES requests in all (default 300); the count is printed at the end and
written to var/faults/fuzz-pages.json.
"""

from __future__ import annotations

import math
import os
import re
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.faults.fuzz_support import HOSTILE_TEXTS, Tally, World, module_world

SKIP_PREFIXES = ("api/", "admin/", "v1/", "healthz", "readyz", "accounts/logout/", "static/")
TOTAL_EXAMPLES = int(os.environ.get("FUZZ_PAGE_EXAMPLES", "300"))
TALLY = Tally("fuzz-pages")
INPUT = re.compile(r'<(?:input|select|textarea)[^>]*\bname="([^"]+)"[^>]*>', re.IGNORECASE)
VALUE = re.compile(r'\bname="([^"]+)"[^>]*\bvalue="([^"]*)"', re.IGNORECASE)
OPTION = re.compile(r'<option value="([^"]*)"', re.IGNORECASE)


def _routes(resolver: URLResolver | None = None, prefix: str = "") -> list[str]:
    found: list[str] = []
    for pattern in (resolver or get_resolver()).url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found.extend(_routes(pattern, route))
        elif isinstance(pattern, URLPattern) and not route.startswith(SKIP_PREFIXES):
            found.append("/" + route)
    return found


ROUTES = _routes()
FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _fill(route: str, world: World) -> str:
    if "<int:pk>" not in route:
        return route
    if route.startswith("/accounts/users/"):
        pk = world.ids["users"]
    elif route.startswith("/clusters/"):
        pk = world.ids["clusters"]
    elif route.startswith("/deployments/topology/") or route.startswith("/topologies/"):
        pk = world.ids["topologies"]
    else:
        pk = world.ids["deployments"]
    return route.replace("<int:pk>", str(pk))


def _form_fields(client, routes: list[str], world: World) -> dict[str, list[str]]:
    """Every field name the pages render, with the values they offer (options, defaults); routes that
    only take a POST (their GET answers 405) are noted in _POST_ONLY."""
    fields: dict[str, list[str]] = {}
    for route in routes:
        response = client.get(_fill(route, world))
        if response.status_code == 405:
            _POST_ONLY.add(route)
        if response.status_code != 200 or not response.get("Content-Type", "").startswith("text/html"):
            continue
        page = response.content.decode()
        for name in INPUT.findall(page):
            fields.setdefault(name, [])
        for name, value in VALUE.findall(page):
            fields.setdefault(name, []).append(value)
        for value in OPTION.findall(page):
            fields.setdefault("role", []).append(value)
    fields.pop("csrfmiddlewaretoken", None)
    return fields


_FIELDS: dict[str, list[str]] = {}
_POST_ONLY: set[str] = set()


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with module_world(django_db_blocker) as world:
        yield world


@pytest.fixture(scope="module", autouse=True)
def _report(request: pytest.FixtureRequest):
    yield
    path = TALLY.write()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n{TALLY.line()} (written to {path})")


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES)
def test_no_posted_form_gets_a_5xx(route: str, client, admin_user, world):
    client.force_login(admin_user)
    path = _fill(route, world)
    if not _FIELDS:  # read once: the pages render the same fields whatever the ids
        _FIELDS.update(_form_fields(client, ROUTES, world))
    fields = _FIELDS
    # A page with a form of its own gets three times the examples of a POST-only action.
    unit = TOTAL_EXAMPLES / (3 * len(ROUTES) - 2 * len(_POST_ONLY))
    examples = max(5, math.ceil(unit * (1 if route in _POST_ONLY else 3)))
    names = sorted(fields) or ["name"]
    value_of = {name: st.sampled_from(sorted(set(fields[name])) + HOSTILE_TEXTS) for name in names}

    @settings(FUZZ, max_examples=examples)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(names), max_size=8, unique=True), label="fields")
        form = {name: data.draw(value_of[name], label=name) for name in chosen}
        body = urlencode(
            {k: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for k, v in form.items()}
        )
        with transaction.atomic():
            response = client.post(path, body, content_type="application/x-www-form-urlencoded")
            transaction.set_rollback(True)
        TALLY.add(route, response.status_code)
        assert response.status_code < 500, (path, form, response.content[:500])

    run()
