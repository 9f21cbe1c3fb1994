"""Telemetry REST: history, latest snapshot and SLO alerts of a topology (viewer role)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.errors import DomainError
from keys.scopes import Scope
from telemetry import selectors
from telemetry.api.serializers import (
    HistoryQuerySerializer,
    HistorySerializer,
    SnapshotSerializer,
    TelemetryAlertSerializer,
)
from telemetry.filtersets import TelemetryAlertFilterSet
from telemetry.models import TelemetryAlert
from topologies.models import Topology


def _topology(pk: int) -> Topology:
    return get_object_or_404(Topology, pk=pk)


class TopologyMetricsView(APIView):
    required_scopes = {"read": Scope.TELEMETRY_READ}

    @extend_schema(
        operation_id="topology_metrics_history",
        summary="Metric history of a topology",
        description=(
            "Step-aligned means of the named series over [start, end). Windows up to 1 h (within the "
            "last 24 h) read raw points; longer ones read 1-minute rollups (kept 30 days). Also returns "
            "the deploys, role changes and SLO alerts of the window."
        ),
        parameters=[
            OpenApiParameter("series", OpenApiTypes.STR, required=True, description="Comma-separated names."),
            OpenApiParameter(
                "start", OpenApiTypes.STR, description="Unix seconds or ISO 8601; default end-15min."
            ),
            OpenApiParameter("end", OpenApiTypes.STR, description="Unix seconds or ISO 8601; default now."),
            OpenApiParameter("step", OpenApiTypes.INT, description="Bucket seconds; default ~300 buckets."),
        ],
        responses=HistorySerializer,
    )
    def get(self, request: Request, pk: int) -> Response:
        topology = _topology(pk)
        query = HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data: dict[str, Any] = query.validated_data
        result = selectors.history(
            topology_id=topology.pk,
            names=data["series"],
            start=data["start"],
            end=data["end"],
            step=data["step"],
        )
        return Response(result)


class TopologyLatestMetricsView(APIView):
    required_scopes = {"read": Scope.TELEMETRY_READ}

    @extend_schema(
        operation_id="topology_metrics_latest",
        summary="Latest telemetry snapshot of a topology",
        description="The last collection (health in words, SLO, per role/pod/link values). "
        "health.state is 'stale' when no collection arrived for three intervals.",
        responses=SnapshotSerializer,
    )
    def get(self, request: Request, pk: int) -> Response:
        topology = _topology(pk)
        snapshot = selectors.latest_snapshot(topology_id=topology.pk)
        if snapshot is None:
            raise DomainError(
                f"no telemetry for topology {topology.name} yet; it appears within one collection "
                "interval after the topology is deployed",
                code="no_telemetry",
                status_code=404,
            )
        return Response(snapshot)


class TopologyAlertList(generics.ListAPIView[TelemetryAlert]):
    required_scopes = {"read": Scope.TELEMETRY_READ}
    serializer_class = TelemetryAlertSerializer
    filterset_class = TelemetryAlertFilterSet

    @extend_schema(operation_id="topology_alerts", summary="SLO alerts of a topology, newest first")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[TelemetryAlert]:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return TelemetryAlert.objects.none()
        topology = _topology(int(self.kwargs["pk"]))
        return selectors.topology_alerts(topology_id=topology.pk)
