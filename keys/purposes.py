"""Purposes: each a template of defaults and a cap on expiry (pure data)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import models

from keys.scopes import Scope


class Kind(models.TextChoices):
    MANAGEMENT = "management", "Management (Tandem's REST API)"
    INFERENCE = "inference", "Inference (the OpenAI-compatible gateway)"


@dataclass(frozen=True)
class Purpose:
    name: str
    label: str
    description: str
    kind: str
    scopes: tuple[str, ...]
    expiry_days: int
    max_expiry_days: int
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_concurrent: int | None = None
    requests_per_day: int | None = None
    requests_per_month: int | None = None
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    alert_thresholds: tuple[int, ...] = field(default=(80, 95))


PURPOSES: dict[str, Purpose] = {
    p.name: p
    for p in (
        Purpose(
            "debug",
            "Debug",
            "Short-lived key to try a new deployment by hand; low limits so a mistake stays small.",
            Kind.INFERENCE,
            (Scope.INFERENCE,),
            expiry_days=7,
            max_expiry_days=7,
            requests_per_minute=30,
            tokens_per_minute=20_000,
            max_concurrent=2,
            requests_per_day=1_000,
            tokens_per_day=500_000,
        ),
        Purpose(
            "production",
            "Production",
            "Live application traffic.",
            Kind.INFERENCE,
            (Scope.INFERENCE,),
            expiry_days=90,
            max_expiry_days=365,
            requests_per_minute=6_000,
            max_concurrent=256,
        ),
        Purpose(
            "fallback",
            "Production fallback",
            "A separate key for the application's fallback path, rotated apart from the main one.",
            Kind.INFERENCE,
            (Scope.INFERENCE,),
            expiry_days=90,
            max_expiry_days=365,
            requests_per_minute=3_000,
            max_concurrent=128,
        ),
        Purpose(
            "coding-assistant",
            "Coding assistant",
            "Cline, Codex or Claude Code for one person; bounded per day.",
            Kind.INFERENCE,
            (Scope.INFERENCE,),
            expiry_days=30,
            max_expiry_days=90,
            requests_per_minute=120,
            tokens_per_minute=400_000,
            max_concurrent=8,
            tokens_per_day=20_000_000,
        ),
        Purpose(
            "automation",
            "Automation (CI)",
            "Scripts and CI pipelines driving Tandem's REST API.",
            Kind.MANAGEMENT,
            (Scope.TOPOLOGIES_READ, Scope.DEPLOY, Scope.TELEMETRY_READ),
            expiry_days=90,
            max_expiry_days=365,
            requests_per_minute=600,
            max_concurrent=16,
        ),
        Purpose(
            "telemetry",
            "Telemetry (traces)",
            "Engines and routers sending their trace spans (OTLP/HTTP) to Tandem's /v1/traces; "
            "it cannot call models.",
            Kind.INFERENCE,
            (Scope.TRACES_WRITE,),
            expiry_days=365,
            max_expiry_days=365,
            requests_per_minute=6_000,
            max_concurrent=64,
        ),
        Purpose(
            "custom",
            "Custom",
            "Anything else; name it with a label of your own.",
            Kind.INFERENCE,
            (Scope.INFERENCE,),
            expiry_days=30,
            max_expiry_days=365,
            requests_per_minute=600,
            max_concurrent=32,
        ),
    )
}


def purpose_for(name: str) -> Purpose:
    """The template for a stored purpose; custom labels use the ``custom`` template."""
    return PURPOSES.get(name, PURPOSES["custom"])
