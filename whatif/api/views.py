"""Thin API views of what-if runs: start and list per topology, read, cancel, apply a split."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView, ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.roles import Role
from controlplane.client_ip import client_ip
from topologies import selectors as topology_selectors
from whatif import selectors, services
from whatif.api.serializers import (
    ApplyInputSerializer,
    ApplyOutcomeSerializer,
    ApplyPreviewSerializer,
    WhatIfRunInputSerializer,
    WhatIfRunSerializer,
)
from whatif.models import WhatIfRun

SCOPES = {"read": "topologies:read", "write": "rebalance"}


class TopologyWhatIfRuns(ListAPIView[WhatIfRun]):
    """What-if runs of a topology, newest first (GET); start one (POST, operators): 202 with the queued run,
    409 while the topology has one queued or running, 429 while you have two."""

    serializer_class = WhatIfRunSerializer
    write_role = Role.OPERATOR
    required_scopes = SCOPES

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return WhatIfRun.objects.none()
        topology = get_object_or_404(topology_selectors.topology_list(), pk=self.kwargs["pk"])
        return selectors.whatif_run_list(topology=topology)

    @extend_schema(request=WhatIfRunInputSerializer, responses={202: WhatIfRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
        data = WhatIfRunInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.whatif_run_create(
            topology=topology,
            user=request.user,
            window_seconds=data.validated_data["window_seconds"],
            end=data.validated_data.get("end"),
            splits=[tuple(s) for s in data.validated_data.get("splits") or []],
            trace=data.validated_data.get("trace"),
            source_ip=client_ip(request),
        )
        return Response(WhatIfRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class WhatIfRunDetail(RetrieveAPIView[WhatIfRun]):
    """One what-if run: inputs, state, progress, the simulator's result or the error."""

    serializer_class = WhatIfRunSerializer
    required_scopes = SCOPES

    def get_queryset(self) -> Any:
        return selectors.whatif_run_all()


class _OnRun(GenericAPIView[WhatIfRun]):
    write_role = Role.OPERATOR
    required_scopes = SCOPES

    def get_queryset(self) -> Any:
        return selectors.whatif_run_all()


@extend_schema(request=None, responses={200: WhatIfRunSerializer})
class WhatIfRunCancel(_OnRun):
    """Cancel a queued run at once, or a running one before its next split (operators); 409 once finished."""

    serializer_class = WhatIfRunSerializer

    def post(self, request: Request, pk: int) -> Response:
        run = services.whatif_run_cancel(
            run=self.get_object(), actor=request.user, source_ip=client_ip(request)
        )
        return Response(WhatIfRunSerializer(run).data)


@extend_schema(
    request=ApplyInputSerializer, responses={200: ApplyPreviewSerializer, 202: ApplyOutcomeSerializer}
)
class WhatIfRunApply(_OnRun):
    """Apply a simulated split (operators). confirm false: the diff, current → proposed, and the path
    (200). confirm true: a deployed topology goes through the planner's ratio change (a rebalance), an
    undeployed one gets a new revision with these replicas (202); audited as whatif.apply."""

    serializer_class = ApplyInputSerializer  # type: ignore[assignment]

    def post(self, request: Request, pk: int) -> Response:
        data = ApplyInputSerializer(data=request.data)  # a body it cannot read: 400 before any lookup
        data.is_valid(raise_exception=True)
        run = self.get_object()
        prefill, decode = data.validated_data["prefill"], data.validated_data["decode"]
        if not data.validated_data["confirm"]:
            preview = services.apply_preview(run=run, prefill=prefill, decode=decode)
            return Response(ApplyPreviewSerializer(preview).data)
        outcome = services.whatif_run_apply(
            run=run, prefill=prefill, decode=decode, actor=request.user, source_ip=client_ip(request)
        )
        return Response(ApplyOutcomeSerializer(outcome).data, status=status.HTTP_202_ACCEPTED)
