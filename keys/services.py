"""Writes: create, change, rotate and revoke keys; record failures, usage and budget alerts.

Every change bumps the key's generation in Redis (at once and again after commit), which every
process checks on the key's next request: revocation, expiry and limit changes take effect at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.roles import Role
from audit.services import audit_record
from controlplane.api.errors import DomainError
from keys import limits, selectors, tokens, validation
from keys.models import ApiKey, ApiKeySecret, KeyPolicy
from keys.purposes import PURPOSES
from keys.records import KeyRecord
from keys.scopes import Scope, scopes_for_role

logger = logging.getLogger(__name__)

AUDITED_FIELDS = (
    "name",
    "team",
    "scopes",
    "allowed_models",
    "allowed_cidrs",
    "alert_thresholds",
    "expires_at",
    *validation.LIMIT_FIELDS,
)


@dataclass(frozen=True)
class Issued:
    """A key and its secret, which exists only here: show it once, never store or log it."""

    key: ApiKey
    secret: str


def _redis_unavailable(error: Exception) -> DomainError:
    return DomainError(
        f"Redis is not answering ({type(error).__name__}); "
        "key changes need it to reach every process at once. "
        "Nothing was changed; retry when Redis is back.",
        code="redis_unavailable",
        status_code=503,
    )


def _invalidate(key_ids: list[str]) -> None:
    """Stale at once (a process reloading now reads the old row and is made stale again after commit)."""
    try:
        limits.bump_generation(key_ids)
    except redis.RedisError as error:
        raise _redis_unavailable(error) from None

    def after_commit() -> None:
        try:
            limits.bump_generation(key_ids)
        except redis.RedisError:
            logger.exception("could not publish a key change after commit; processes see it within %s s", 300)

    transaction.on_commit(after_commit)


def _require_manage(*, key: ApiKey | None, owner: Any, actor: Any, actor_key: KeyRecord | None) -> None:
    """Own keys: anyone (a key needs keys:write); others' keys: admins (a key needs keys:admin)."""
    own = owner.pk == actor.pk
    if actor_key is not None:
        needed = Scope.KEYS_WRITE if own else Scope.KEYS_ADMIN
        if needed not in actor_key.scopes and Scope.KEYS_ADMIN not in actor_key.scopes:
            raise DomainError(
                f"This key lacks the {needed} scope needed to manage "
                f"{'its owner' if own else 'other users'}'s keys.",
                code="missing_scope",
                status_code=403,
            )
    if not own and not actor.has_role(Role.ADMIN):
        raise DomainError("Only admins manage other users' keys.", code="forbidden", status_code=403)


def _scope_bounds(*, owner: Any, actor_key: KeyRecord | None) -> tuple[frozenset[str], str]:
    held = scopes_for_role(owner.role, active=owner.is_active)
    why = f"the owner's role ({owner.role}) does not hold it"
    if actor_key is not None:
        held = held & actor_key.scopes
        why = (
            f"the owner's role ({owner.role}) or the key making this request ({actor_key.name}) "
            "does not hold it"
        )
    return held, why


def _new_secret(key: ApiKey) -> str:
    secret = tokens.generate(key.kind)
    parsed = tokens.parse(secret)
    ApiKeySecret.objects.create(
        key=key,
        digest=tokens.digest(secret, settings.API_KEY_PEPPER),
        display_prefix=parsed.display_prefix,
        last4=parsed.last4,
    )
    return secret


@transaction.atomic
def key_create(
    *,
    actor: Any,
    owner: Any | None = None,
    name: Any,
    purpose: Any,
    purpose_label: Any = "",
    kind: Any = None,
    scopes: Any = None,
    team: Any = "",
    allowed_models: Any = None,
    allowed_cidrs: Any = None,
    alert_thresholds: Any = None,
    expires_at: Any = None,
    limits_given: dict[str, Any] | None = None,
    actor_key: KeyRecord | None = None,
    source_ip: str | None = None,
) -> Issued:
    owner = owner or actor
    _require_manage(key=None, owner=owner, actor=actor, actor_key=actor_key)
    template, label = validation.clean_purpose(purpose, purpose_label)
    key_kind = validation.clean_kind(kind, template)
    if (
        key_kind == "inference"
        and owner.pk == actor.pk
        and not selectors.may_issue_own_inference_keys(user=actor)
    ):
        raise DomainError(VIEWER_KEYS_OFF, code="viewer_keys_off", status_code=403)
    within, why = _scope_bounds(owner=owner, actor_key=actor_key)
    if scopes is None:
        defaults = [s for s in template.scopes if s in within] if key_kind == template.kind else []
        scopes = defaults or ([Scope.INFERENCE] if key_kind == "inference" else [])
    now = timezone.now()
    given = limits_given or {}
    values = {
        field: validation.clean_limit(field, given[field] if field in given else getattr(template, field))
        for field in validation.LIMIT_FIELDS
    }
    key = ApiKey(
        name=validation.clean_text("name", name, max_length=100, required=True),
        purpose=template.name,
        purpose_label=label,
        kind=key_kind,
        owner=owner,
        team=validation.clean_text("team", team, max_length=100, required=False),
        scopes=validation.clean_scopes(scopes, kind=key_kind, within=within, within_why=why),
        allowed_models=validation.clean_models(allowed_models or []),
        allowed_cidrs=validation.clean_cidrs(allowed_cidrs or []),
        alert_thresholds=validation.clean_thresholds(
            list(template.alert_thresholds) if alert_thresholds is None else alert_thresholds
        ),
        expires_at=validation.clean_expiry(expires_at, purpose=template, now=now),
        created_by=actor,
        created_by_key_id=actor_key.key_id if actor_key is not None else None,
        **values,
    )
    key.save()
    secret = _new_secret(key)
    audit_record(
        action="key.create",
        actor=actor,
        target=key,
        source_ip=source_ip,
        actor_label=_actor_label(actor, actor_key),
        detail={
            "purpose": key.purpose_display,
            "kind": key.kind,
            "owner": owner.get_username(),
            "scopes": key.scopes,
            "expires_at": key.expires_at.isoformat(),
            "secret": f"{secret[: tokens.DISPLAY_PREFIX_LENGTH]}…{secret[-4:]}",
        },
    )
    return Issued(key=key, secret=secret)


VIEWER_KEYS_OFF = (
    "An admin has turned off inference keys issued by viewers for themselves; ask an admin to issue "
    "one for you, or to turn the setting back on on the Keys page."
)


@transaction.atomic
def key_policy_set(
    *,
    actor: Any,
    viewers_issue_inference_keys: bool,
    actor_key: KeyRecord | None = None,
    source_ip: str | None = None,
) -> KeyPolicy:
    """Admins only: whether viewers may issue inference keys for themselves. Keys already issued keep
    working either way; an admin may always issue one for a viewer."""
    if not actor.has_role(Role.ADMIN):
        raise DomainError("Only admins change the key policy.", code="forbidden", status_code=403)
    if actor_key is not None and Scope.KEYS_ADMIN not in actor_key.scopes:
        raise DomainError(
            f"This key lacks the {Scope.KEYS_ADMIN} scope needed to change the key policy.",
            code="missing_scope",
            status_code=403,
        )
    policy, _ = KeyPolicy.objects.select_for_update().get_or_create(pk=1)
    before = policy.viewers_issue_inference_keys
    policy.viewers_issue_inference_keys = bool(viewers_issue_inference_keys)
    policy.updated_by = actor
    policy.save()
    audit_record(
        action="keys.policy",
        actor=actor,
        target=policy,
        source_ip=source_ip,
        actor_label=_actor_label(actor, actor_key),
        detail={"viewers_issue_inference_keys": policy.viewers_issue_inference_keys, "was": before},
    )
    return policy


def _actor_label(actor: Any, actor_key: KeyRecord | None) -> str:
    name = actor.get_username() if actor is not None and actor.is_authenticated else "system"
    return f"{name} (key {actor_key.name})" if actor_key is not None else name


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


@transaction.atomic
def key_update(
    *,
    key: ApiKey,
    actor: Any,
    changes: dict[str, Any],
    actor_key: KeyRecord | None = None,
    source_ip: str | None = None,
) -> ApiKey:
    key = ApiKey.objects.select_for_update().select_related("owner").get(pk=key.pk)
    _require_manage(key=key, owner=key.owner, actor=actor, actor_key=actor_key)
    if key.revoked_at is not None:
        raise DomainError(
            "This key is revoked; it cannot be changed. Create a new key.", code="revoked", status_code=409
        )
    unknown = sorted(set(changes) - set(AUDITED_FIELDS))
    if unknown:
        raise validation.invalid(unknown[0], f"cannot be changed; changeable: {', '.join(AUDITED_FIELDS)}")
    template = PURPOSES[key.purpose]
    before = {field: _jsonable(getattr(key, field)) for field in AUDITED_FIELDS}
    now = timezone.now()
    for field, value in changes.items():
        if field == "name":
            key.name = validation.clean_text("name", value, max_length=100, required=True)
        elif field == "team":
            key.team = validation.clean_text("team", value, max_length=100, required=False)
        elif field == "scopes":
            within, why = _scope_bounds(owner=key.owner, actor_key=actor_key)
            key.scopes = validation.clean_scopes(value, kind=key.kind, within=within, within_why=why)
        elif field == "allowed_models":
            key.allowed_models = validation.clean_models(value)
        elif field == "allowed_cidrs":
            key.allowed_cidrs = validation.clean_cidrs(value)
        elif field == "alert_thresholds":
            key.alert_thresholds = validation.clean_thresholds(value)
        elif field == "expires_at":
            key.expires_at = validation.clean_expiry(value, purpose=template, now=now, created=key.created)
        else:
            setattr(key, field, validation.clean_limit(field, value))
    after = {field: _jsonable(getattr(key, field)) for field in AUDITED_FIELDS}
    changed = {
        field: [before[field], after[field]] for field in AUDITED_FIELDS if before[field] != after[field]
    }
    if not changed:
        return key
    key.save()
    _invalidate([str(key.pk)])
    action = "key.scopes_change" if "scopes" in changed else "key.update"
    audit_record(
        action=action,
        actor=actor,
        target=key,
        source_ip=source_ip,
        actor_label=_actor_label(actor, actor_key),
        detail={"changed": changed},
    )
    return key


@transaction.atomic
def key_rotate(
    *,
    key: ApiKey,
    actor: Any,
    grace_seconds: Any = None,
    actor_key: KeyRecord | None = None,
    source_ip: str | None = None,
) -> Issued:
    """A new secret for the same key id; the previous one keeps working for the grace period."""
    key = ApiKey.objects.select_for_update().select_related("owner").get(pk=key.pk)
    _require_manage(key=key, owner=key.owner, actor=actor, actor_key=actor_key)
    if key.stored_status() != "active":
        raise DomainError(
            f"This key is {key.stored_status()}; only active keys can be rotated. Create a new key.",
            code=key.stored_status(),
            status_code=409,
        )
    grace = validation.clean_grace(grace_seconds, settings.API_KEY_ROTATION_GRACE_SECONDS)
    now = timezone.now()
    retire = now + timedelta(seconds=grace)
    # A secret already retiring keeps its (earlier) end; the current one gets the new grace.
    key.secrets.filter(retires_at__isnull=True).update(retires_at=retire)
    key.secrets.filter(retires_at__gt=retire).update(retires_at=retire)
    secret = _new_secret(key)
    key.save(update_fields=["updated"])
    _invalidate([str(key.pk)])
    audit_record(
        action="key.rotate",
        actor=actor,
        target=key,
        source_ip=source_ip,
        actor_label=_actor_label(actor, actor_key),
        detail={
            "grace_seconds": grace,
            "previous_secret_stops_at": retire.isoformat(),
            "secret": f"{secret[: tokens.DISPLAY_PREFIX_LENGTH]}…{secret[-4:]}",
        },
    )
    return Issued(key=key, secret=secret)


@transaction.atomic
def key_revoke(
    *,
    key: ApiKey,
    actor: Any,
    reason: Any = "",
    actor_key: KeyRecord | None = None,
    source_ip: str | None = None,
) -> ApiKey:
    key = ApiKey.objects.select_for_update().select_related("owner").get(pk=key.pk)
    _require_manage(key=key, owner=key.owner, actor=actor, actor_key=actor_key)
    if key.revoked_at is not None:
        return key
    key.revoked_at = timezone.now()
    key.revoked_by = actor
    key.revoke_reason = validation.clean_text("reason", reason, max_length=200, required=False)
    key.save(update_fields=["revoked_at", "revoked_by", "revoke_reason", "updated"])
    _invalidate([str(key.pk)])
    audit_record(
        action="key.revoke",
        actor=actor,
        target=key,
        source_ip=source_ip,
        actor_label=_actor_label(actor, actor_key),
        detail={"reason": key.revoke_reason},
    )
    return key


def keys_owner_changed(*, owner_id: int) -> None:
    """An owner's role or state changed: their keys lose at once what the owner lost."""
    ids = [str(pk) for pk in ApiKey.objects.filter(owner_id=owner_id).values_list("pk", flat=True)]
    if not ids:
        return
    try:
        limits.bump_generation(ids)
    except redis.RedisError:
        logger.exception("could not mark keys of user %s stale; they catch up within 300 s", owner_id)

    def after_commit() -> None:
        try:
            limits.bump_generation(ids)
        except redis.RedisError:
            logger.exception("could not mark keys of user %s stale after commit", owner_id)

    transaction.on_commit(after_commit)
