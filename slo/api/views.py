"""SLO API: thin views over slo.services, slo.delivery and slo.selectors.

Roles like the topologies' API: viewers read; operators define SLOs, acknowledge and silence alerts,
and manage notification targets. Keys: reads need ``telemetry:read``, changes ``topologies:write``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.roles import Role
from controlplane.client_ip import client_ip
from keys.scopes import Scope
from slo import delivery, selectors, services
from slo.api.serializers import (
    NotificationDeliverySerializer,
    NotificationTargetCreateSerializer,
    NotificationTargetSerializer,
    NotificationTargetUpdateSerializer,
    SloAlertSerializer,
    SloDefinitionCreateSerializer,
    SloDefinitionSerializer,
    SloDefinitionUpdateSerializer,
    SloSilenceSerializer,
)
from slo.filtersets import DeliveryFilterSet, SloAlertFilterSet
from slo.models import Delivery, NotificationTarget, Slo, SloAlert
from topologies.models import Topology

SCOPES = {"read": Scope.TELEMETRY_READ, "write": Scope.TOPOLOGIES_WRITE}


def _who(request: Request) -> dict[str, Any]:
    return {"actor": request.user, "source_ip": client_ip(request)}


def _objective(data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    if "objective_percent" in out:
        out["objective"] = out.pop("objective_percent") / 100.0
    return out


class TopologySloList(generics.GenericAPIView[Slo]):
    """A topology's SLOs. Viewers read; operators add one."""

    serializer_class = SloDefinitionSerializer
    queryset = Slo.objects.none()  # the schema's model; the views read through slo.selectors
    write_role = Role.OPERATOR
    required_scopes = SCOPES
    pagination_class = None

    def _topology(self) -> Topology:
        return get_object_or_404(Topology, pk=self.kwargs["pk"])

    @extend_schema(operation_id="topology_slos", responses=SloDefinitionSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        rows = selectors.slo_list(topology_id=self._topology().pk)
        return Response(SloDefinitionSerializer(rows, many=True).data)

    @extend_schema(
        operation_id="topology_slos_create",
        request=SloDefinitionCreateSerializer,
        responses={201: SloDefinitionSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        data = SloDefinitionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = _objective(data.validated_data)
        slo = services.slo_create(
            topology=self._topology(),
            sli=values["sli"],
            objective=values["objective"],
            threshold_ms=values.get("threshold_ms"),
            window_days=values["window_days"],
            **_who(request),
        )
        return Response(SloDefinitionSerializer(slo).data, status=status.HTTP_201_CREATED)


class TopologySloDefaults(generics.GenericAPIView[Slo]):
    serializer_class = SloDefinitionSerializer
    queryset = Slo.objects.none()  # the schema's model; the views read through slo.selectors
    write_role = Role.OPERATOR
    required_scopes = SCOPES
    pagination_class = None

    @extend_schema(
        operation_id="topology_slos_defaults",
        request=None,
        responses={201: SloDefinitionSerializer(many=True)},
        summary="Add the usual SLOs: TTFT and TBT at the topology's targets (99 %), success 99.5 %, 28 days",
    )
    def post(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(Topology, pk=pk)
        made = services.slo_create_defaults(topology=topology, **_who(request))
        return Response(SloDefinitionSerializer(made, many=True).data, status=status.HTTP_201_CREATED)


class SloViewSet(
    mixins.RetrieveModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[Slo]
):
    """One SLO: read, change, delete, silence its notifications."""

    serializer_class = SloDefinitionSerializer
    write_role = Role.OPERATOR
    required_scopes = SCOPES
    http_method_names = ["get", "patch", "delete", "post", "head", "options"]

    def get_queryset(self) -> QuerySet[Slo]:
        return selectors.slo_list()

    @extend_schema(request=SloDefinitionUpdateSerializer, responses=SloDefinitionSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = SloDefinitionUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        slo = services.slo_update(
            slo=self.get_object(), changes=_objective(data.validated_data), **_who(request)
        )
        return Response(SloDefinitionSerializer(slo).data)

    def perform_destroy(self, instance: Slo) -> None:
        services.slo_delete(slo=instance, **_who(self.request))

    @extend_schema(request=SloSilenceSerializer, responses=SloDefinitionSerializer)
    @action(detail=True, methods=["post"])
    def silence(self, request: Request, pk: str) -> Response:
        data = SloSilenceSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        slo = services.slo_silence(slo=self.get_object(), **data.validated_data, **_who(request))
        return Response(SloDefinitionSerializer(slo).data)

    @extend_schema(request=None, responses=SloDefinitionSerializer)
    @action(detail=True, methods=["post"])
    def unsilence(self, request: Request, pk: str) -> Response:
        slo = services.slo_unsilence(slo=self.get_object(), **_who(request))
        return Response(SloDefinitionSerializer(slo).data)


class SloAlertViewSet(viewsets.ReadOnlyModelViewSet[SloAlert]):
    """Burn-rate alerts, newest first, with their transitions. Operators acknowledge and silence."""

    serializer_class = SloAlertSerializer
    filterset_class = SloAlertFilterSet
    write_role = Role.OPERATOR
    action_roles = {"acknowledge": Role.OPERATOR, "silence": Role.OPERATOR}
    required_scopes = {**SCOPES, "acknowledge": Scope.TOPOLOGIES_WRITE, "silence": Scope.TOPOLOGIES_WRITE}

    def get_queryset(self) -> QuerySet[SloAlert]:
        return selectors.alert_list()

    @extend_schema(request=None, responses=SloAlertSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str) -> Response:
        alert = services.alert_acknowledge(alert=self.get_object(), **_who(request))
        return Response(SloAlertSerializer(selectors.alert_list().get(pk=alert.pk)).data)

    @extend_schema(
        request=SloSilenceSerializer, responses=SloAlertSerializer, summary="Silence the alert's SLO"
    )
    @action(detail=True, methods=["post"])
    def silence(self, request: Request, pk: str) -> Response:
        data = SloSilenceSerializer(data=request.data)  # a body it cannot read: 400 before any lookup
        data.is_valid(raise_exception=True)
        alert = self.get_object()
        services.slo_silence(slo=alert.slo, **data.validated_data, **_who(request))
        return Response(SloAlertSerializer(selectors.alert_list().get(pk=alert.pk)).data)


class TargetViewSet(viewsets.ModelViewSet[NotificationTarget]):
    """Webhook notification targets (generic JSON, Slack, Alertmanager); URLs are shown masked."""

    serializer_class = NotificationTargetSerializer
    write_role = Role.OPERATOR
    required_scopes = {**SCOPES, "test": Scope.TOPOLOGIES_WRITE}
    action_roles = {"test": Role.OPERATOR}
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[NotificationTarget]:
        return selectors.target_list()

    @extend_schema(request=NotificationTargetCreateSerializer, responses={201: NotificationTargetSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = NotificationTargetCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = delivery.target_create(**data.validated_data, **_who(request))
        return Response(NotificationTargetSerializer(target).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=NotificationTargetUpdateSerializer, responses=NotificationTargetSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = NotificationTargetUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        target = delivery.target_update(
            target=self.get_object(), changes=data.validated_data, **_who(request)
        )
        return Response(NotificationTargetSerializer(target).data)

    def perform_destroy(self, instance: NotificationTarget) -> None:
        delivery.target_delete(target=instance, **_who(self.request))

    @extend_schema(
        request=None, responses={202: NotificationDeliverySerializer}, summary="Send a test notification"
    )
    @action(detail=True, methods=["post"])
    def test(self, request: Request, pk: str) -> Response:
        made = delivery.target_test(target=self.get_object(), **_who(request))
        return Response(
            NotificationDeliverySerializer(selectors.delivery_list().get(pk=made.pk)).data, status=202
        )


class DeliveryViewSet(viewsets.ReadOnlyModelViewSet[Delivery]):
    """Notifications sent (or being retried), each with every attempt's status code or error."""

    serializer_class = NotificationDeliverySerializer
    filterset_class = DeliveryFilterSet
    required_scopes = SCOPES

    def get_queryset(self) -> QuerySet[Delivery]:
        return selectors.delivery_list()
