"""GET/PUT /api/v1/key-policy/: the site-wide rules for issuing keys (admins change them)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.roles import Role
from controlplane.api.fields import RequiredBooleanField
from controlplane.client_ip import client_ip
from keys import selectors, services
from keys.models import KeyPolicy
from keys.records import KeyRecord
from keys.scopes import Scope


class KeyPolicySerializer(serializers.ModelSerializer[KeyPolicy]):
    viewers_issue_inference_keys = RequiredBooleanField(
        help_text="Viewers may issue inference keys for themselves (admins may issue theirs)."
    )
    updated = serializers.DateTimeField(read_only=True, allow_null=True, help_text="null: never changed")
    updated_by = serializers.SerializerMethodField(help_text="the admin who changed it last (null: nobody)")

    class Meta:
        model = KeyPolicy
        fields = ["viewers_issue_inference_keys", "updated", "updated_by"]
        read_only_fields = ["updated", "updated_by"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_updated_by(self, policy: KeyPolicy) -> str | None:
        return policy.updated_by.get_username() if policy.updated_by is not None else None


@extend_schema(responses={200: KeyPolicySerializer})
class KeyPolicyView(GenericAPIView[KeyPolicy]):
    """Whether viewers may issue inference keys for themselves (default true). Everyone reads it; only
    admins change it, and each change is in the audit log."""

    required_scopes = {"read": Scope.KEYS_READ, "write": Scope.KEYS_ADMIN}
    write_role = Role.ADMIN
    serializer_class = KeyPolicySerializer

    def get_queryset(self) -> Any:
        return KeyPolicy.objects.all()

    def get_object(self) -> KeyPolicy:
        return selectors.key_policy()  # one row, no id in the URL

    def get(self, request: Request) -> Response:
        return Response(KeyPolicySerializer(selectors.key_policy()).data)

    @extend_schema(request=KeyPolicySerializer)
    def put(self, request: Request) -> Response:
        serializer = KeyPolicySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        policy = services.key_policy_set(
            actor=request.user,
            viewers_issue_inference_keys=serializer.validated_data["viewers_issue_inference_keys"],
            actor_key=request.auth if isinstance(request.auth, KeyRecord) else None,
            source_ip=client_ip(request),
        )
        return Response(KeyPolicySerializer(policy).data)
