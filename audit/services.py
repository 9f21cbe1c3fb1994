from __future__ import annotations

from typing import Any

from django.db import models, transaction

from audit.models import AuditEvent


@transaction.atomic
def audit_record(
    *,
    action: str,
    actor: Any = None,
    target: models.Model | None = None,
    source_ip: str | None = None,
    detail: dict[str, Any] | None = None,
    actor_label: str | None = None,
) -> AuditEvent:
    """Append one audit event. `actor` is a user, or None for the system."""
    label = actor_label or (
        actor.get_username() if actor is not None and actor.is_authenticated else "system"
    )
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        actor_label=label,
        action=action,
        target_type=target._meta.label_lower if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        target_label=str(target)[:200] if target is not None else "",
        source_ip=source_ip,
        detail=detail or {},
    )
