"""Sandbox-backed fixtures for the fault suite (the deployments tests' own, shared rather than copied).
Import them into a test module: ``from tests.faults.sandbox_fixtures import *  # noqa: F403``."""

from __future__ import annotations

from deployments.tests.conftest import (
    cluster,
    conn,
    fast_deploys,
    lab,
    lab_sandbox,
    make_topology,
    new_topology,
)

__all__ = ["cluster", "conn", "fast_deploys", "lab", "lab_sandbox", "make_topology", "new_topology"]
