"""Answers the health endpoints before anything that checks the Host header.

Kubelet probes and container health checks call the pod by its IP address, which is (rightly) not
in ALLOWED_HOSTS; they must still get an answer. Nothing else is served here.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from controlplane import views

HEALTH_PATHS = {"/healthz": views.healthz, "/readyz": views.readyz}


class HealthCheckMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = HEALTH_PATHS.get(request.path_info)
        if view is not None:
            return view(request)
        return self.get_response(request)
