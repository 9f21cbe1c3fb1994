from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from keys import services


@pytest.fixture
def issue():
    def make(owner, **kwargs):
        kwargs.setdefault("name", "ci-deploy")
        kwargs.setdefault("purpose", "automation")
        return services.key_create(actor=kwargs.pop("actor", owner), owner=owner, **kwargs)

    return make


@pytest.fixture
def key_client():
    def make(secret: str, *, raw_header: str | None = None) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=raw_header if raw_header is not None else f"Bearer {secret}")
        return client

    return make
