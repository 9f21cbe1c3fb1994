from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from keys.models import PURPOSE_CHOICES, ApiKey, ApiKeyUsage, Status
from keys.purposes import Kind
from keys.scopes import Scope, scopes_for_kind, scopes_for_role
from keys.selectors import key_current_secret, key_live_state

_LIMIT_HELP = {
    "requests_per_minute": "Requests per minute (null: no limit).",
    "tokens_per_minute": "Tokens per minute, counted from the gateway's usage (null: no limit).",
    "max_concurrent": "Requests in flight at once (null: no limit).",
    "requests_per_day": "Requests per UTC day (null: no quota).",
    "requests_per_month": "Requests per UTC calendar month (null: no quota).",
    "tokens_per_day": "Tokens per UTC day (null: no quota).",
    "tokens_per_month": "Tokens per UTC calendar month (null: no quota).",
}


def _limit_field(name: str, **kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(
        allow_null=True, min_value=0, max_value=10**15, help_text=_LIMIT_HELP[name], **kwargs
    )


class ExhaustedSerializer(serializers.Serializer[dict[str, Any]]):
    quota = serializers.CharField()
    used = serializers.IntegerField()
    allowed = serializers.IntegerField()
    resets_at = serializers.DateTimeField()


class UsageNowSerializer(serializers.Serializer[dict[str, Any]]):
    requests_this_minute = serializers.IntegerField()
    tokens_this_minute = serializers.IntegerField()
    requests_today = serializers.IntegerField()
    requests_this_month = serializers.IntegerField()
    tokens_today = serializers.IntegerField()
    tokens_this_month = serializers.IntegerField()
    in_flight = serializers.IntegerField()


class KeySerializer(serializers.Serializer[ApiKey]):
    """A key as every reader sees it: never its secret, only the secret's first and last characters."""

    id = serializers.UUIDField(read_only=True)
    name = serializers.CharField()
    purpose = serializers.ChoiceField(choices=PURPOSE_CHOICES)
    purpose_label = serializers.CharField(help_text="Label of a custom purpose; empty otherwise.")
    purpose_display = serializers.CharField()
    kind = serializers.ChoiceField(choices=Kind.choices)
    owner = serializers.CharField(source="owner.username")
    owner_id = serializers.IntegerField()
    team = serializers.CharField()
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.choices))
    effective_scopes = serializers.SerializerMethodField(
        help_text="The scopes the key holds today: its scopes within what its owner's role allows now."
    )
    allowed_models = serializers.ListField(child=serializers.CharField(), help_text="Empty: every model.")
    allowed_cidrs = serializers.ListField(child=serializers.CharField(), help_text="Empty: any address.")
    alert_thresholds = serializers.ListField(child=serializers.IntegerField())
    requests_per_minute = _limit_field("requests_per_minute")
    tokens_per_minute = _limit_field("tokens_per_minute")
    max_concurrent = _limit_field("max_concurrent")
    requests_per_day = _limit_field("requests_per_day")
    requests_per_month = _limit_field("requests_per_month")
    tokens_per_day = _limit_field("tokens_per_day")
    tokens_per_month = _limit_field("tokens_per_month")
    expires_at = serializers.DateTimeField()
    status = serializers.SerializerMethodField()
    exhausted = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()
    secret_prefix = serializers.SerializerMethodField()
    secret_last4 = serializers.SerializerMethodField()
    previous_secret_stops_at = serializers.SerializerMethodField(
        help_text="After a rotation: when the previous secret stops working (null when none is in grace)."
    )
    revoked_at = serializers.DateTimeField(allow_null=True)
    revoke_reason = serializers.CharField()
    created = serializers.DateTimeField()
    created_by = serializers.SerializerMethodField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    last_used_ip = serializers.IPAddressField(allow_null=True)

    def _live(self, key: ApiKey) -> Any:
        cache: dict[Any, Any] = self.__dict__.setdefault("_live_cache", {})
        if key.pk not in cache:
            cache[key.pk] = key_live_state(key=key)
        return cache[key.pk]

    @extend_schema_field(serializers.ListField(child=serializers.ChoiceField(choices=Scope.choices)))
    def get_effective_scopes(self, key: ApiKey) -> list[str]:
        owner = key.owner
        held = scopes_for_role(owner.role, active=owner.is_active)
        return sorted(set(key.scopes) & held & scopes_for_kind(key.kind))

    @extend_schema_field(serializers.ChoiceField(choices=Status.choices))
    def get_status(self, key: ApiKey) -> str:
        return str(self._live(key).status)

    @extend_schema_field(ExhaustedSerializer(many=True))
    def get_exhausted(self, key: ApiKey) -> list[dict[str, Any]]:
        return list(ExhaustedSerializer(self._live(key).exhausted, many=True).data)

    @extend_schema_field(UsageNowSerializer(allow_null=True))
    def get_usage(self, key: ApiKey) -> dict[str, int] | None:
        usage = self._live(key).usage
        return dict(usage) if usage else None

    def _secret(self, key: ApiKey) -> Any:
        return key_current_secret(key=key)

    def get_secret_prefix(self, key: ApiKey) -> str:
        secret = self._secret(key)
        return secret.display_prefix if secret else ""

    def get_secret_last4(self, key: ApiKey) -> str:
        secret = self._secret(key)
        return secret.last4 if secret else ""

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_previous_secret_stops_at(self, key: ApiKey) -> str | None:
        retiring = [s.retires_at for s in key.secrets.all() if s.retires_at is not None]
        latest = max(retiring, default=None)
        return serializers.DateTimeField().to_representation(latest) if latest else None

    def get_created_by(self, key: ApiKey) -> str:
        return key.created_by.get_username() if key.created_by else ""


class KeyCreateSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(max_length=100)
    purpose = serializers.ChoiceField(choices=PURPOSE_CHOICES)
    purpose_label = serializers.CharField(max_length=64, required=False, allow_blank=True)
    kind = serializers.ChoiceField(
        choices=Kind.choices, required=False, help_text="Default: the purpose's kind."
    )
    owner = serializers.CharField(required=False, help_text="User name; admins may issue keys for others.")
    team = serializers.CharField(max_length=100, required=False, allow_blank=True)
    scopes = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        max_length=20,
        help_text="Default: the purpose's scopes within your role.",
    )
    allowed_models = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=100
    )
    allowed_cidrs = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=32
    )
    alert_thresholds = serializers.ListField(child=serializers.IntegerField(), required=False, max_length=5)
    expires_at = serializers.DateTimeField(required=False, help_text="Default and cap: the purpose's.")
    requests_per_minute = _limit_field("requests_per_minute", required=False)
    tokens_per_minute = _limit_field("tokens_per_minute", required=False)
    max_concurrent = _limit_field("max_concurrent", required=False)
    requests_per_day = _limit_field("requests_per_day", required=False)
    requests_per_month = _limit_field("requests_per_month", required=False)
    tokens_per_day = _limit_field("tokens_per_day", required=False)
    tokens_per_month = _limit_field("tokens_per_month", required=False)


class KeyUpdateSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(max_length=100, required=False)
    team = serializers.CharField(max_length=100, required=False, allow_blank=True)
    scopes = serializers.ListField(child=serializers.CharField(max_length=40), required=False, max_length=20)
    allowed_models = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=100
    )
    allowed_cidrs = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=32
    )
    alert_thresholds = serializers.ListField(child=serializers.IntegerField(), required=False, max_length=5)
    expires_at = serializers.DateTimeField(required=False)
    requests_per_minute = _limit_field("requests_per_minute", required=False)
    tokens_per_minute = _limit_field("tokens_per_minute", required=False)
    max_concurrent = _limit_field("max_concurrent", required=False)
    requests_per_day = _limit_field("requests_per_day", required=False)
    requests_per_month = _limit_field("requests_per_month", required=False)
    tokens_per_day = _limit_field("tokens_per_day", required=False)
    tokens_per_month = _limit_field("tokens_per_month", required=False)


class SnippetSerializer(serializers.Serializer[dict[str, str]]):
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    language = serializers.CharField()
    text = serializers.CharField()


class IssuedKeySerializer(serializers.Serializer[dict[str, Any]]):
    """Returned once, at creation or rotation: the only time the secret is shown."""

    key = KeySerializer()
    secret = serializers.CharField(help_text="The full secret. Shown only now; Tandem keeps only its hash.")
    base_url = serializers.CharField(help_text="The server root the snippets use.")
    model = serializers.CharField(help_text="A model id this key may call (inference keys).")
    snippets = SnippetSerializer(many=True)


class RotateSerializer(serializers.Serializer[dict[str, Any]]):
    grace_seconds = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=30 * 86400,
        help_text="How long the previous secret keeps working (default 24 h; 0 stops it at once).",
    )


class RevokeSerializer(serializers.Serializer[dict[str, Any]]):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=200)


class UsageSerializer(serializers.ModelSerializer[ApiKeyUsage]):
    class Meta:
        model = ApiKeyUsage
        fields = ["hour", "requests", "tokens", "denied"]


class PurposeSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    description = serializers.CharField()
    kind = serializers.ChoiceField(choices=Kind.choices)
    scopes = serializers.ListField(child=serializers.CharField())
    expiry_days = serializers.IntegerField()
    max_expiry_days = serializers.IntegerField()
    requests_per_minute = serializers.IntegerField(allow_null=True)
    tokens_per_minute = serializers.IntegerField(allow_null=True)
    max_concurrent = serializers.IntegerField(allow_null=True)
    requests_per_day = serializers.IntegerField(allow_null=True)
    requests_per_month = serializers.IntegerField(allow_null=True)
    tokens_per_day = serializers.IntegerField(allow_null=True)
    tokens_per_month = serializers.IntegerField(allow_null=True)
    alert_thresholds = serializers.ListField(child=serializers.IntegerField())
