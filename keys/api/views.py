"""Thin API views over keys.services; the secret appears only in create and rotate responses."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from keys import selectors, services
from keys.api.serializers import (
    IssuedKeySerializer,
    KeyCreateSerializer,
    KeySerializer,
    KeyUpdateSerializer,
    PurposeSerializer,
    RevokeSerializer,
    RotateSerializer,
    UsageSerializer,
)
from keys.filtersets import ApiKeyFilterSet
from keys.models import ApiKey
from keys.purposes import PURPOSES
from keys.records import KeyRecord
from keys.scopes import Scope
from keys.snippets import client_snippets
from keys.validation import LIMIT_FIELDS


def _actor_key(request: Request) -> KeyRecord | None:
    return request.auth if isinstance(request.auth, KeyRecord) else None


def issued_body(request: Request, issued: services.Issued) -> dict[str, Any]:
    """The shown-once answer: the secret and the three things a client needs, ready to paste."""
    base_url = request.build_absolute_uri("/").rstrip("/")
    model = selectors.model_for_key(key=issued.key)
    return {
        "key": KeySerializer(issued.key).data,
        "secret": issued.secret,
        "base_url": base_url,
        "model": model,
        "snippets": client_snippets(
            base_url=base_url,
            secret=issued.secret,
            kind=issued.key.kind,
            model=model,
            purpose=issued.key.purpose,
            aliases=selectors.aliases_for_model(model=model),
        ),
    }


class ApiKeyViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[ApiKey],
):
    """Per-purpose API keys. Everyone manages their own; admins manage everyone's."""

    serializer_class = KeySerializer
    filterset_class = ApiKeyFilterSet
    write_role = Role.VIEWER
    required_scopes = {
        "read": Scope.KEYS_READ,
        "write": Scope.KEYS_WRITE,
        "purposes": Scope.KEYS_READ,
        "usage": Scope.KEYS_READ,
    }
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self) -> QuerySet[ApiKey]:
        if getattr(self, "swagger_fake_view", False):
            return ApiKey.objects.none()
        return selectors.keys_visible_to(user=self.request.user)

    @extend_schema(request=KeyCreateSerializer, responses={201: IssuedKeySerializer})
    def create(self, request: Request) -> Response:
        """Issue a key. The response holds its secret: the only time it is ever shown."""
        data = KeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        owner: Any = request.user
        if "owner" in values:
            owner = get_user_model().objects.filter(username=values.pop("owner")).first()
            if owner is None:
                raise DomainError("owner: no such user", code="invalid", fields={"owner": ["no such user"]})
        issued = services.key_create(
            actor=request.user,
            owner=owner,
            name=values.get("name"),
            purpose=values.get("purpose"),
            purpose_label=values.get("purpose_label", ""),
            kind=values.get("kind"),
            scopes=values.get("scopes"),
            team=values.get("team", ""),
            allowed_models=values.get("allowed_models"),
            allowed_cidrs=values.get("allowed_cidrs"),
            alert_thresholds=values.get("alert_thresholds"),
            expires_at=values.get("expires_at"),
            limits_given={field: values[field] for field in LIMIT_FIELDS if field in values},
            actor_key=_actor_key(request),
            source_ip=client_ip(request),
        )
        response = Response(issued_body(request, issued), status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(request=KeyUpdateSerializer, responses=KeySerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change limits, scopes (within the owner's role), allow-lists or expiry (within its cap)."""
        data = KeyUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = services.key_update(
            key=self.get_object(),
            actor=request.user,
            changes=dict(data.validated_data),
            actor_key=_actor_key(request),
            source_ip=client_ip(request),
        )
        return Response(KeySerializer(selectors.keys_visible_to(user=request.user).get(pk=key.pk)).data)

    @extend_schema(request=RotateSerializer, responses=IssuedKeySerializer)
    @action(detail=True, methods=["post"])
    def rotate(self, request: Request, pk: str | None = None) -> Response:
        """A new secret for the same key id; the previous one works for the grace period, then stops."""
        data = RotateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        issued = services.key_rotate(
            key=self.get_object(),
            actor=request.user,
            grace_seconds=data.validated_data.get("grace_seconds"),
            actor_key=_actor_key(request),
            source_ip=client_ip(request),
        )
        response = Response(issued_body(request, issued))
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(request=RevokeSerializer, responses=KeySerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Stop the key at once, in every process. Revocation cannot be undone."""
        data = RevokeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = services.key_revoke(
            key=self.get_object(),
            actor=request.user,
            reason=data.validated_data.get("reason", ""),
            actor_key=_actor_key(request),
            source_ip=client_ip(request),
        )
        return Response(KeySerializer(selectors.keys_visible_to(user=request.user).get(pk=key.pk)).data)

    @extend_schema(
        parameters=[OpenApiParameter("hours", int, description="How far back (1-2160, default 168).")],
        responses=UsageSerializer(many=True),
    )
    @action(detail=True, methods=["get"], pagination_class=None, filterset_class=None)
    def usage(self, request: Request, pk: str | None = None) -> Response:
        """Requests, tokens and refusals per hour (rolled up every few seconds)."""
        raw = request.query_params.get("hours", "168")
        if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= 2160:
            raise DomainError(
                "hours: must be a whole number of hours from 1 to 2160",
                code="invalid",
                fields={"hours": ["must be a whole number of hours from 1 to 2160"]},
            )
        rows = selectors.key_usage_history(key=self.get_object(), hours=int(raw))
        return Response(UsageSerializer(rows, many=True).data)

    @extend_schema(responses=PurposeSerializer(many=True))
    @action(detail=False, methods=["get"], pagination_class=None, filterset_class=None)
    def purposes(self, request: Request) -> Response:
        """The purpose templates: defaults and the expiry cap of each."""
        return Response(PurposeSerializer([asdict(p) for p in PURPOSES.values()], many=True).data)
