"""Thin API views: switch a role, set the ratio, planner settings, decisions, rebalances (the what-if runs
are in whatif.api)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.roles import Role
from controlplane.client_ip import client_ip
from rebalancing import selectors, services
from rebalancing.api.serializers import (
    DecisionSerializer,
    HandoffInputSerializer,
    PlannerSerializer,
    RatioInputSerializer,
    RebalanceSerializer,
    SwitchRoleInputSerializer,
)
from rebalancing.models import Decision, Rebalance
from topologies import selectors as topology_selectors
from topologies.models import Topology

SCOPES = {"read": "topologies:read", "write": "rebalance"}


class _OnTopology(GenericAPIView[Topology]):
    write_role = Role.OPERATOR
    required_scopes = SCOPES

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    def topology(self, pk: int) -> Topology:
        return get_object_or_404(self.get_queryset(), pk=pk)


@extend_schema(request=SwitchRoleInputSerializer, responses={202: RebalanceSerializer})
class TopologySwitchRole(_OnTopology):
    serializer_class = SwitchRoleInputSerializer  # type: ignore[assignment]
    """Switch one running instance to the other role: in place where the engine can (MindIE on Kthena:
    drain, unlink, switch, re-link, each step in the rebalance's log), else restart-based (the new
    instance is Ready before the named one is drained and removed). 400/409 say why a switch is refused."""

    def post(self, request: Request, pk: int) -> Response:
        topology = self.topology(pk)
        data = SwitchRoleInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rebalance = services.rebalance_switch_start(
            topology=topology,
            instance=data.validated_data["instance"],
            target_role=data.validated_data["target_role"],
            actor=request.user,
            source_ip=client_ip(request),
            drain_timeout_seconds=data.validated_data.get("drain_timeout_seconds"),
        )
        return Response(RebalanceSerializer(rebalance).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=RatioInputSerializer, responses={202: RebalanceSerializer})
class TopologyRatio(_OnTopology):
    serializer_class = RatioInputSerializer  # type: ignore[assignment]
    """Set replicas per role within the budget; Tandem plans one-at-a-time moves, each run as a scale job."""

    def post(self, request: Request, pk: int) -> Response:
        topology = self.topology(pk)
        data = RatioInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rebalance = services.rebalance_ratio_start(
            topology=topology,
            prefill=data.validated_data["prefill"],
            decode=data.validated_data["decode"],
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(RebalanceSerializer(rebalance).data, status=status.HTTP_202_ACCEPTED)


class TopologyPlanner(_OnTopology):
    serializer_class = PlannerSerializer  # type: ignore[assignment]
    """The planner's mode (off / advisory / auto), parameters and ratio constraint."""

    @extend_schema(responses={200: PlannerSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return Response(PlannerSerializer(selectors.planner_config(self.topology(pk))).data)

    @extend_schema(request=PlannerSerializer, responses={200: PlannerSerializer})
    def put(self, request: Request, pk: int) -> Response:
        topology = self.topology(pk)
        data = PlannerSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        config = services.planner_config_set(
            topology=topology,
            mode=data.validated_data["mode"],
            params=data.validated_data.get("params"),
            min_ratio=data.validated_data.get("min_ratio"),
            max_ratio=data.validated_data.get("max_ratio"),
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(PlannerSerializer(config).data)


@extend_schema(request=HandoffInputSerializer, responses={200: PlannerSerializer})
class TopologyPlannerHandoff(_OnTopology):
    serializer_class = HandoffInputSerializer  # type: ignore[assignment]
    """Hand the planner's P:D bounds to the Kthena AutoscalingPolicy that scales both roles: Tandem writes
    them as its disaggregatedTarget.ratioConstraint (prefill over decode) and stays advisory, so Kthena alone
    sets the replica counts. 400 without both bounds or with a policy not found scaling the roles."""

    def post(self, request: Request, pk: int) -> Response:
        topology = self.topology(pk)
        data = HandoffInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        config = services.planner_handoff(
            topology=topology,
            policy=data.validated_data["policy"],
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(PlannerSerializer(config).data)


class TopologyDecisions(ListAPIView[Any]):
    """The planner's decisions, newest first: inputs, rule fired, action, outcome."""

    serializer_class = DecisionSerializer
    required_scopes = SCOPES

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Decision.objects.none()
        topology = get_object_or_404(topology_selectors.topology_list(), pk=self.kwargs["pk"])
        return selectors.decision_list(topology=topology)


class TopologyRebalances(ListAPIView[Any]):
    """Ratio changes and role switches, newest first, with their moves and step log."""

    serializer_class = RebalanceSerializer
    required_scopes = SCOPES

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Rebalance.objects.none()
        topology = get_object_or_404(topology_selectors.topology_list(), pk=self.kwargs["pk"])
        return selectors.rebalance_list(topology=topology)
