"""Clients of the shared sandbox cluster and a fresh namespace per test (removed afterwards)."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client


@pytest.fixture
def core(sandbox_cluster):
    return client.CoreV1Api(sandbox_cluster.api_client())


@pytest.fixture
def apps(sandbox_cluster):
    return client.AppsV1Api(sandbox_cluster.api_client())


@pytest.fixture
def custom(sandbox_cluster):
    return client.CustomObjectsApi(sandbox_cluster.api_client())


@pytest.fixture
def namespace(request, core):
    """A namespace named after the test module (``test_api_crud`` → ``api-crud-1a2b3c4d``)."""
    stem = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")[:40]
    name = f"{stem}-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
