"""Thin API views: each POST validates input and calls one service; reads go through selectors."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.generics import GenericAPIView, ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from deployments import selectors, services
from deployments.api.serializers import (
    DeployInputSerializer,
    DeploymentDetailSerializer,
    DeploymentSerializer,
    DeployPolicySerializer,
    KeepRunningSerializer,
    ModelNameRoutingSerializer,
    RollbackInputSerializer,
    RollbackPlanSerializer,
    ScaleInputSerializer,
)
from deployments.filtersets import DeploymentFilterSet
from deployments.models import Deployment, DeployPolicy
from deployments.rollback_services import rollback_target, topology_keep_running, topology_rollback_start
from deployments.rollbacks import rollback_plan
from deployments.serving import model_name_routing
from keys.scopes import Scope
from topologies import selectors as topology_selectors
from topologies.models import Revision, Topology


class DeploymentList(ListAPIView[Deployment]):
    """Deployments, newest first; filter by topology, state, kind or active."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ}

    serializer_class = DeploymentSerializer
    filterset_class = DeploymentFilterSet

    def get_queryset(self) -> Any:
        return selectors.deployment_list()


class DeploymentDetail(RetrieveAPIView[Deployment]):
    """One deployment with its step log."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ}

    serializer_class = DeploymentDetailSerializer

    def get_queryset(self) -> Any:
        return selectors.deployment_list().prefetch_related("steps")


class NoInput(Serializer[Any]):
    """An action that reads no body."""


class _TopologyAction(GenericAPIView[Topology]):
    required_scopes = {"write": Scope.DEPLOY}
    write_role = Role.OPERATOR
    input_serializer: type[Serializer[Any]] | None = None

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    def get_serializer_class(self) -> type[Serializer[Any]]:
        # OPTIONS describes the body this action reads (DRF's metadata asks for a serializer).
        return self.input_serializer or NoInput

    def _input(self, request: Request) -> dict[str, Any]:
        if self.input_serializer is None:
            return {}
        serializer = self.input_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def _revision(self, topology: Topology, number: int) -> Revision:
        revision = topology_selectors.revision_get(topology, number)
        if revision is None:
            numbers = sorted(topology_selectors.topology_revisions(topology).values_list("number", flat=True))
            raise DomainError(
                f"topology {topology.name} has no revision {number}",
                code="not_found",
                fields={"revision": [f"use one of the existing revision numbers: {numbers}"]},
            )
        return revision

    @abstractmethod
    def start(self, request: Request, topology: Topology, data: dict[str, Any]) -> Deployment:
        """Call the one service this endpoint stands for."""

    def post(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        deployment = self.start(request, topology, self._input(request))
        return Response(DeploymentSerializer(deployment).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=DeployInputSerializer, responses={202: DeploymentSerializer})
class TopologyDeploy(_TopologyAction):
    """Deploy the current (or a given) revision. 202 with the queued deployment; 409 when one is running,
    or when preflight blocks the revision (``preflight_blocked``: each blocking finding under its spec field,
    and ``override_preflight``), unless ``override_preflight`` says why to deploy anyway (audited). An
    unreachable cluster does not refuse the request: the job's own preflight decides before applying."""

    input_serializer = DeployInputSerializer

    def start(self, request: Request, topology: Topology, data: dict[str, Any]) -> Deployment:
        revision = self._revision(topology, data["revision"]) if data.get("revision") else None
        override = str(data.get("override_preflight") or "")
        if not override.strip():
            refusal = selectors.deploy_preflight_refusal(topology, revision)
            if refusal is not None:
                raise refusal
        return services.deployment_start(
            topology=topology,
            revision=revision,
            actor=request.user,
            source_ip=client_ip(request),
            override_preflight=override,
        )


@extend_schema_view(
    get=extend_schema(request=None, responses={200: RollbackPlanSerializer}),
    post=extend_schema(request=RollbackInputSerializer, responses={202: DeploymentSerializer}),
)
class TopologyRollback(_TopologyAction):
    """GET: the revisions one may return to, the default, and what each changes against the running one.
    POST: deploy an earlier revision again (default: the newest that ran successfully); one that never
    ran successfully needs ``allow_untested``."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ, "write": Scope.DEPLOY}
    input_serializer = RollbackInputSerializer

    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(RollbackPlanSerializer(rollback_plan(topology).as_dict()).data)

    def start(self, request: Request, topology: Topology, data: dict[str, Any]) -> Deployment:
        number = data.get("revision")
        if number is not None:
            self._revision(topology, int(number))
        return topology_rollback_start(
            topology=topology,
            to_revision=rollback_target(topology=topology, number=int(number) if number else None),
            actor=request.user,
            source_ip=client_ip(request),
            allow_untested=bool(data.get("allow_untested")),
        )


@extend_schema(request=None, responses={200: KeepRunningSerializer})
class TopologyKeepRunning(GenericAPIView[Topology]):
    """Make the running revision the desired one again after a failed deploy (nothing is deployed)."""

    required_scopes = {"write": Scope.DEPLOY}
    write_role = Role.OPERATOR
    serializer_class = NoInput

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    def post(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        dropped = topology.current_revision.number if topology.current_revision is not None else None
        kept = topology_keep_running(topology=topology, actor=request.user, source_ip=client_ip(request))
        running = kept.deployed_revision.number if kept.deployed_revision is not None else 0
        body = {
            "desired": running,
            "running": running,
            "message": f"kept revision {running}; revision {dropped} is no longer desired",
        }
        return Response(KeepRunningSerializer(body).data)


@extend_schema(request=ScaleInputSerializer, responses={202: DeploymentSerializer})
class TopologyScale(_TopologyAction):
    """Change one role's replicas: saves a new revision and deploys it."""

    input_serializer = ScaleInputSerializer

    def start(self, request: Request, topology: Topology, data: dict[str, Any]) -> Deployment:
        return services.topology_scale_start(
            topology=topology,
            role=data["role"],
            replicas=data["replicas"],
            actor=request.user,
            source_ip=client_ip(request),
        )


@extend_schema(request=None, responses={202: DeploymentSerializer})
class TopologyReapply(_TopologyAction):
    """Re-apply the deployed revision (undo drift)."""

    def start(self, request: Request, topology: Topology, data: dict[str, Any]) -> Deployment:
        return services.topology_reapply_start(
            topology=topology, actor=request.user, source_ip=client_ip(request)
        )


@extend_schema(request=None, responses={202: DeploymentSerializer})
class DeploymentCancel(GenericAPIView[Deployment]):
    """Stop a running deployment; it rolls back to the last good revision."""

    required_scopes = {"write": Scope.DEPLOY}

    write_role = Role.OPERATOR
    serializer_class = NoInput

    def get_queryset(self) -> Any:
        return selectors.deployment_list()

    def post(self, request: Request, pk: int) -> Response:
        deployment = get_object_or_404(self.get_queryset(), pk=pk)
        deployment = services.deployment_cancel(
            deployment=deployment, actor=request.user, source_ip=client_ip(request)
        )
        return Response(DeploymentSerializer(deployment).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=DeployPolicySerializer, responses={200: DeployPolicySerializer})
class TopologyDeployPolicy(GenericAPIView[DeployPolicy]):
    """The topology's ready timeout and automatic rollback (null fields use the environment's defaults)."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ, "write": Scope.DEPLOY}

    serializer_class = DeployPolicySerializer
    write_role = Role.OPERATOR

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(DeployPolicySerializer(selectors.deploy_policy(topology)).data)

    def put(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        serializer = DeployPolicySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        policy = services.deploy_policy_set(
            topology=topology,
            ready_timeout_seconds=serializer.validated_data["ready_timeout_seconds"],
            auto_rollback=serializer.validated_data["auto_rollback"],
            keep_failed_first_deploy=serializer.validated_data.get("keep_failed_first_deploy"),
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(DeployPolicySerializer(policy).data)


@extend_schema(responses={200: ModelNameRoutingSerializer})
class TopologyModelName(GenericAPIView[Any]):
    """Which topology Tandem's gateway sends this topology's model name to, and why (the oldest topology
    claiming a name keeps it; preflight refuses a second one on the same router)."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ}
    serializer_class = ModelNameRoutingSerializer

    def get_queryset(self) -> Any:
        return topology_selectors.topology_list()

    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(ModelNameRoutingSerializer(model_name_routing(topology)).data)
