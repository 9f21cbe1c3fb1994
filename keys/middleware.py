"""Frees a key's concurrency slot once its request has its response."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)


class KeyGrantMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        finally:
            grant = getattr(request, "_tandem_grant", None)
            if grant is not None and grant.slot:
                try:
                    grant.settle()
                except Exception:
                    logger.warning("could not release a key's concurrency slot; it frees itself in 10 min")
