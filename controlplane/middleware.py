"""Project middleware: health answers before Host checks, and the API's body-size limit.

The health endpoints are answered before anything that checks the Host header. Kubelet probes and
container health checks call the pod by its IP address, which is (rightly) not in ALLOWED_HOSTS;
they must still get an answer.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from controlplane import views
from controlplane.api.errors import error_body

HEALTH_PATHS = {"/healthz": views.healthz, "/readyz": views.readyz}


class HealthCheckMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = HEALTH_PATHS.get(request.path_info)
        if view is not None:
            return view(request)
        return self.get_response(request)


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
