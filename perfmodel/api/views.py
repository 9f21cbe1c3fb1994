"""Calibration REST: the performance model fitted to a topology's telemetry (viewer role)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from keys.scopes import Scope
from perfmodel import selectors
from perfmodel.api.serializers import CalibrationQuerySerializer, CalibrationSerializer
from topologies.models import Topology


class TopologyCalibrationView(APIView):
    required_scopes = {"read": Scope.TELEMETRY_READ}

    @extend_schema(
        operation_id="topology_calibration",
        summary="Performance model calibrated from a topology's telemetry",
        description=(
            "Fits the prefill rate, the decode step model, the prefix-cache hit rate and the KV transfer "
            "time to the window's collection intervals, with the number of intervals each fit used and "
            "the error of predicted against measured TTFT and TBT per role. perf is only filled when the "
            "verdict is ok; otherwise reasons say what to run. See docs/calibration.md."
        ),
        parameters=[OpenApiParameter("window", OpenApiTypes.STR, description="90s, 10m, 1h; default 10m.")],
        responses=CalibrationSerializer,
    )
    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(Topology, pk=pk)
        query = CalibrationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        window: int = query.validated_data["window"]
        result = selectors.topology_calibration(topology_id=topology.pk, window_s=window)
        body: dict[str, Any] = {"topology": topology.pk, "window_s": window, **result.as_dict()}
        return Response(CalibrationSerializer(body).data)
