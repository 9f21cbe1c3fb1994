"""Scopes a key may hold, and which of them each role may hand to its keys (pure)."""

from __future__ import annotations

from django.db import models

from accounts.roles import RANK, Role


class Scope(models.TextChoices):
    CLUSTERS_READ = "clusters:read", "Read clusters, nodes and health"
    CLUSTERS_WRITE = "clusters:write", "Register, change, test and remove clusters"
    TOPOLOGIES_READ = "topologies:read", "Read topologies, revisions and preflight"
    TOPOLOGIES_WRITE = "topologies:write", "Create, change and remove topologies"
    DEPLOY = "deploy", "Deploy, roll back, re-apply, scale and cancel"
    REBALANCE = "rebalance", "Switch roles and change the P:D ratio"
    TELEMETRY_READ = "telemetry:read", "Read metrics, links and alerts"
    AUDIT_READ = "audit:read", "Read the activity log"
    KEYS_READ = "keys:read", "List and read your own keys"
    KEYS_WRITE = "keys:write", "Create, change, rotate and revoke your own keys"
    KEYS_ADMIN = "keys:admin", "Manage everyone's keys"
    USERS_ADMIN = "users:admin", "Manage users and roles"
    INFERENCE = "inference", "Call models through the OpenAI-compatible gateway"
    TRACES_WRITE = "traces:write", "Send engines' and routers' trace spans (OTLP) to Tandem"


ALL_SCOPES: frozenset[str] = frozenset(Scope.values)
# Keys of the gateway's kind: calling models, or sending trace spans to its OTLP receiver (/v1/traces).
INFERENCE_SCOPES: frozenset[str] = frozenset({Scope.INFERENCE, Scope.TRACES_WRITE})
MANAGEMENT_SCOPES: frozenset[str] = ALL_SCOPES - INFERENCE_SCOPES

# The least role that may hold each scope; a key's scopes never exceed its owner's role.
_LEAST_ROLE: dict[str, str] = {
    Scope.CLUSTERS_READ: Role.VIEWER,
    Scope.TOPOLOGIES_READ: Role.VIEWER,
    Scope.TELEMETRY_READ: Role.VIEWER,
    Scope.AUDIT_READ: Role.VIEWER,
    Scope.KEYS_READ: Role.VIEWER,
    Scope.KEYS_WRITE: Role.VIEWER,
    Scope.INFERENCE: Role.VIEWER,
    Scope.TRACES_WRITE: Role.OPERATOR,
    Scope.TOPOLOGIES_WRITE: Role.OPERATOR,
    Scope.DEPLOY: Role.OPERATOR,
    Scope.REBALANCE: Role.OPERATOR,
    Scope.CLUSTERS_WRITE: Role.ADMIN,
    Scope.KEYS_ADMIN: Role.ADMIN,
    Scope.USERS_ADMIN: Role.ADMIN,
}
assert set(_LEAST_ROLE) == ALL_SCOPES


def scopes_for_role(role: str, *, active: bool = True) -> frozenset[str]:
    """The role is the only source of rights (Django's superuser flag opens nothing in Tandem)."""
    if not active:
        return frozenset()
    rank = RANK.get(Role(role), -1)
    return frozenset(scope for scope, least in _LEAST_ROLE.items() if RANK[Role(least)] <= rank)


def scopes_for_kind(kind: str) -> frozenset[str]:
    return INFERENCE_SCOPES if kind == "inference" else MANAGEMENT_SCOPES


def unknown_scopes(scopes: list[str] | set[str] | frozenset[str]) -> list[str]:
    return sorted(set(scopes) - ALL_SCOPES)


# An endpoint every management key may call whatever its scopes (who am I).
ANY_SCOPE = "*"
