from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.roles import Role
from controlplane.client_ip import client_ip
from gateway import selectors, services
from gateway.api.serializers import (
    BreakerEventSerializer,
    GatewayRequestSerializer,
    GatewaySeriesQuerySerializer,
    GatewaySeriesSerializer,
    ProbeRunSerializer,
    RouteSerializer,
    VerifyRequestSerializer,
)
from gateway.models import BreakerEvent, GatewayRequest, ProbeRun, Route
from keys.scopes import Scope
from topologies import selectors as topology_selectors


class TopologyGatewayRoute(GenericAPIView[Route]):
    """How the gateway reaches this topology: serving endpoint, model aliases and fallback upstream."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ, "write": Scope.TOPOLOGIES_WRITE}
    serializer_class = RouteSerializer
    write_role = Role.OPERATOR

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        route, _ = Route.objects.get_or_create(topology=topology)
        return Response(RouteSerializer(route).data)

    @extend_schema(request=RouteSerializer, responses=RouteSerializer)
    def patch(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        data = RouteSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        route = services.route_update(
            topology=topology,
            changes=dict(data.validated_data),
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(RouteSerializer(route).data)


class TopologyGatewayRequests(GenericAPIView[GatewayRequest]):
    """The latest requests through the gateway to this topology, and its breaker's changes."""

    required_scopes = {"read": Scope.TELEMETRY_READ}
    serializer_class = GatewayRequestSerializer
    pagination_class = None  # the latest rows as a plain list

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    @extend_schema(responses=GatewayRequestSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(
            GatewayRequestSerializer(selectors.recent_requests(topology_id=topology.pk), many=True).data
        )


class TopologyBreakerEvents(GenericAPIView[BreakerEvent]):
    required_scopes = {"read": Scope.TELEMETRY_READ}
    serializer_class = BreakerEventSerializer
    pagination_class = None  # the latest rows as a plain list

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    @extend_schema(responses=BreakerEventSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(
            BreakerEventSerializer(selectors.breaker_events(topology_id=topology.pk), many=True).data
        )


class TopologyVerify(GenericAPIView[ProbeRun]):
    """Run the verification probes (smoke, prefix reuse, concurrency, links, fallback) and list past runs."""

    required_scopes = {"read": Scope.TELEMETRY_READ, "write": Scope.DEPLOY}
    serializer_class = ProbeRunSerializer
    pagination_class = None  # the latest rows as a plain list
    write_role = Role.OPERATOR

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    @extend_schema(responses=ProbeRunSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(ProbeRunSerializer(selectors.probe_runs(topology_id=topology.pk), many=True).data)

    @extend_schema(request=VerifyRequestSerializer, responses={202: ProbeRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        data = VerifyRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.probe_run_start(
            topology=topology,
            kinds=data.validated_data.get("kinds"),
            params=data.validated_data.get("params"),
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(ProbeRunSerializer(run).data, status=202)


class ProbeRunDetail(GenericAPIView[ProbeRun]):
    required_scopes = {"read": Scope.TELEMETRY_READ}
    serializer_class = ProbeRunSerializer

    def get_queryset(self) -> Any:
        return ProbeRun.objects.all()

    def get(self, request: Request, pk: int) -> Response:
        return Response(ProbeRunSerializer(get_object_or_404(self.get_queryset(), pk=pk)).data)


SERIES_PARAMETERS = [
    OpenApiParameter("start", OpenApiTypes.STR, description="Unix seconds or ISO 8601; default end-1h."),
    OpenApiParameter("end", OpenApiTypes.STR, description="Unix seconds or ISO 8601; default now."),
    OpenApiParameter("step", OpenApiTypes.INT, description="Bucket seconds; default ~120 buckets."),
]
SERIES_DESCRIPTION = (
    "The gateway's per-request records in step-aligned buckets: requests/s by backend (cluster, "
    "fallback, refused before dispatch), the share of 5xx and 4xx answers, TTFT and latency p50/p95 of "
    "the answered requests, and markers where fallback traffic begins and where the breaker changed."
)


def _series_query(request: Request) -> dict[str, Any]:
    query = GatewaySeriesQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class TopologyGatewaySeries(GenericAPIView[Any]):
    required_scopes = {"read": Scope.TOPOLOGIES_READ}
    serializer_class = GatewaySeriesSerializer

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    @extend_schema(
        operation_id="topology_gateway_series",
        summary="Gateway traffic of a topology, charted",
        description=SERIES_DESCRIPTION,
        parameters=SERIES_PARAMETERS,
        responses=GatewaySeriesSerializer,
    )
    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        query = _series_query(request)
        return Response(selectors.gateway_series(topology_id=topology.pk, **query))


class KeyGatewaySeries(GenericAPIView[Any]):
    required_scopes = {"read": Scope.KEYS_READ}
    serializer_class = GatewaySeriesSerializer

    def get_queryset(self) -> Any:
        from keys.selectors import keys_visible_to

        return keys_visible_to(user=self.request.user)

    @extend_schema(
        operation_id="key_gateway_series",
        summary="Gateway traffic of one key, charted",
        description=SERIES_DESCRIPTION + " Only the requests made with this key, across topologies.",
        parameters=SERIES_PARAMETERS,
        responses=GatewaySeriesSerializer,
    )
    def get(self, request: Request, pk: str) -> Response:
        import uuid

        from django.http import Http404

        try:
            key_id = uuid.UUID(pk)
        except ValueError:
            raise Http404 from None  # key ids are UUIDs: no such key
        key = get_object_or_404(self.get_queryset(), pk=key_id)
        query = _series_query(request)
        return Response(selectors.gateway_series(key_id=str(key.pk), **query))
