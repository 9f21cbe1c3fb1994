"""Project-level pages: the overview, the health endpoints, and the not-found and server-error answers."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from controlplane import readiness
from controlplane.api.errors import error_body


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """Every cluster and topology at a glance, problems first; kept live by /ws/overview/."""
    from clusters.selectors import cluster_list
    from gateway.selectors import overview_gateway_rows
    from slo.selectors import overview_rows as overview_slo_rows
    from telemetry.selectors import overview_rows
    from telemetry.views import overview_context

    context = {
        "title": "Overview",
        **overview_context(overview_rows(), cluster_list()),
        "gateway_rows": overview_gateway_rows(),
        "slo_rows": overview_slo_rows(),
    }
    return render(request, "overview.html", context)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive and serving; says nothing about its dependencies."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready when the database and Redis answer; 503 naming what failed otherwise."""
    checks = readiness.check_all()
    failing = {name: result for name, result in checks.items() if result != "ok"}
    body = {"status": "ok" if not failing else "unavailable", "checks": checks}
    if failing:
        body["message"] = "; ".join(f"{name} unreachable: {err}" for name, err in failing.items())
    connection.close_if_unusable_or_obsolete()
    return JsonResponse(body, status=200 if not failing else 503)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """An unknown address under /api/ answers in the API's one error shape; pages get the 404 page."""
    if request.path.startswith("/api/"):
        message = f"no API endpoint at {request.path}; the endpoints are listed at /api/v1/docs/"
        return JsonResponse(error_body("not_found", message), status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refuses before any view (too many fields, a body over the limit, a bad Host)
    answers in the API's one error shape under /api/; pages get the styled 400 page (400.html)."""
    if request.path.startswith("/api/"):
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            message = f"the request body is larger than {limit} bytes; send less in one request"
        elif isinstance(exception, (TooManyFieldsSent, TooManyFilesSent)):
            message = "the request has more form fields or files than Tandem reads; send fewer, or JSON"
        else:
            message = "the request could not be read; check its body, its Content-Type and its Host header"
        return JsonResponse(error_body("bad_request", message), status=400)
    too_big = isinstance(exception, RequestDataTooBig)
    limit_mb = f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1048576:.1f}"
    return render(request, "400.html", {"too_big": too_big, "limit_mb": limit_mb}, status=400)


def server_error(request: HttpRequest) -> HttpResponse:
    """An unexpected failure under /api/ answers in the API's one error shape (details go to the log only)."""
    if request.path.startswith("/api/"):
        message = "the server failed to answer this request; it has been logged, try again or tell an admin"
        return JsonResponse(error_body("server_error", message), status=500)
    return defaults.server_error(request)
