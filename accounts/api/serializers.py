from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounts.models import User
from accounts.roles import Role
from controlplane.api.fields import OptionalEmailField

_ROLE_ERRORS: dict[str, Any] = {
    "invalid_choice": '"{input}" is not a role; use one of: ' + ", ".join(Role.values)
}


class UserSerializer(serializers.ModelSerializer[User]):
    email = OptionalEmailField(read_only=True)

    class Meta:
        model = User
        fields = ["id", "username", "email", "role", "is_active", "date_joined", "last_login"]
        read_only_fields = fields


class UserCreateSerializer(serializers.Serializer[User]):
    username = serializers.CharField(max_length=150)
    email = OptionalEmailField(required=False)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER, error_messages=_ROLE_ERRORS)
    password = serializers.CharField(write_only=True, style={"input_type": "password"})


class UserUpdateSerializer(serializers.Serializer[User]):
    email = OptionalEmailField(required=False)
    role = serializers.ChoiceField(choices=Role.choices, required=False, error_messages=_ROLE_ERRORS)
    is_active = serializers.BooleanField(required=False)
    password = serializers.CharField(write_only=True, required=False, style={"input_type": "password"})


class MeSerializer(serializers.ModelSerializer[User]):
    can_operate = serializers.BooleanField(source="is_operator", read_only=True)
    can_admin = serializers.BooleanField(source="is_admin_role", read_only=True)
    email = OptionalEmailField(read_only=True)

    class Meta:
        model = User
        fields = ["id", "username", "email", "role", "can_operate", "can_admin", "last_login"]
        read_only_fields = fields
