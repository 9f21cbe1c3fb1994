from __future__ import annotations

from typing import cast

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import services
from accounts.api.serializers import MeSerializer, UserCreateSerializer, UserSerializer, UserUpdateSerializer
from accounts.filtersets import UserFilterSet
from accounts.models import User
from accounts.roles import Role
from accounts.selectors import user_list
from controlplane.client_ip import client_ip
from keys.scopes import ANY_SCOPE, Scope


class UserViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[User],
):
    """Users and their roles. Admins only, reads included."""

    serializer_class = UserSerializer
    filterset_class = UserFilterSet
    write_role = Role.ADMIN
    action_roles = {"list": Role.ADMIN, "retrieve": Role.ADMIN}
    required_scopes = {"read": Scope.USERS_ADMIN, "write": Scope.USERS_ADMIN}

    def get_queryset(self) -> QuerySet[User]:
        return user_list()

    @extend_schema(request=UserCreateSerializer, responses={201: UserSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        data = UserCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = services.user_create(actor=request.user, source_ip=client_ip(request), **data.validated_data)
        return Response(UserSerializer(user).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=UserUpdateSerializer, responses={200: UserSerializer})
    def update(self, request: Request, *args: object, **kwargs: object) -> Response:
        user = self.get_object()
        data = UserUpdateSerializer(data=request.data, partial=bool(kwargs.get("partial", False)))
        data.is_valid(raise_exception=True)
        user = services.user_update(
            actor=request.user, user=user, source_ip=client_ip(request), **data.validated_data
        )
        return Response(UserSerializer(user).data)

    @extend_schema(request=UserUpdateSerializer, responses={200: UserSerializer})
    def partial_update(self, request: Request, *args: object, **kwargs: object) -> Response:
        return self.update(request, *args, partial=True, **kwargs)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        services.user_delete(actor=request.user, user=self.get_object(), source_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeView(APIView):
    """The user behind this session or key, with what their role allows."""

    required_scopes = {"read": ANY_SCOPE}

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(cast(User, request.user)).data)
