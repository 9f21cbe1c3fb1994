"""Project middleware: health answers before Host checks, the API's body-size limit, and quick
503s when Redis or the database is down.

The health endpoints are answered before anything that checks the Host header. Kubelet probes and
container health checks call the pod by its IP address, which is (rightly) not in ALLOWED_HOSTS;
they must still get an answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from controlplane import views
from controlplane.api.errors import error_body

logger = logging.getLogger(__name__)
HEALTH_PATHS = {"/healthz": views.healthz, "/readyz": views.readyz}


class HealthCheckMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = HEALTH_PATHS.get(request.path_info)
        if view is not None:
            return view(request)
        return self.get_response(request)


class DependencyUnavailableMiddleware:
    """A request that needed Redis while it is down gets a quick 503 naming Redis, never a 500 or a hang.

    Redis calls have short deadlines (settings ``REDIS_*_SECONDS``), so this answers within about a
    second. What fails here fails closed: for example a login, whose lockout counters live in Redis, is
    refused rather than let through uncounted. API paths get the API's error shape.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        import redis
        from django.db import InterfaceError
        from django.db import OperationalError as DatabaseUnavailable
        from kombu.exceptions import OperationalError as BrokerUnavailable

        if isinstance(exception, (redis.RedisError, BrokerUnavailable)):
            name, code, field = "Redis", "redis_unavailable", "redis"
            what = "Redis (cache, login counters and task queue)"
        elif isinstance(exception, (DatabaseUnavailable, InterfaceError)):
            name, code, field = "PostgreSQL", "database_unavailable", "database"
            what = "The database"
        else:
            return None
        logger.warning("%s %s: %s unavailable: %s", request.method, request.path, name, exception)
        first = (str(exception).strip().splitlines() or [exception.__class__.__name__])[0]
        message = f"{what} does not answer: {first}. This request needs it, so it was refused."
        if request.path.startswith("/api/"):
            body = error_body(code, message, {field: [f"retry when /readyz reports {field} ok"]})
            return JsonResponse(body, status=503, headers={"Retry-After": "5"})
        # No request context: context processors may need the very dependency that is down.
        page = render_to_string("503.html", {"dependency": name, "message": message})
        response = HttpResponse(page, status=503)
        response["Retry-After"] = "5"
        return response


class ApiBodyLimitMiddleware:
    """Under /api/, a body larger than DATA_UPLOAD_MAX_MEMORY_SIZE is answered with 413 in the API's
    error shape before anything reads it (Django alone checks the limit only for form bodies, and
    answers with its HTML 400 page). Pages keep Django's own handling."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and request.path_info.startswith("/api/"):
            raw = request.META.get("CONTENT_LENGTH") or "0"
            length = int(raw) if raw.isascii() and raw.isdigit() else 0
            if length > limit:
                message = (
                    f"the request body is {length} bytes; the API accepts at most {limit} bytes — "
                    "send less in one request"
                )
                return JsonResponse(error_body("payload_too_large", message), status=413)
        return self.get_response(request)
