"""Thin viewsets: each action calls one service or selector."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from accounts.roles import Role
from clusters import selectors, services
from clusters.api.serializers import (
    ClusterCreatedSerializer,
    ClusterSerializer,
    ConnectionResultSerializer,
    DeleteQuerySerializer,
    HealthCheckSerializer,
    InventorySerializer,
)
from clusters.filtersets import ClusterFilterSet
from clusters.models import Cluster
from controlplane.client_ip import client_ip
from keys.scopes import Scope

_CREDENTIALS = ("kubeconfig", "server", "token", "ca_bundle")
_METRICS = (
    "metrics_source",
    "prometheus_url",
    "prometheus_token",
    "prometheus_username",
    "prometheus_password",
)


_TRACE_STORE = ("trace_store", "trace_store_url", "trace_store_token")


class ClusterViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Cluster],
):
    """Registered clusters. Viewers read; admins register, change, check and remove."""

    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    write_role = Role.ADMIN
    action_roles = {"test_connection": Role.OPERATOR}
    required_scopes = {
        "read": Scope.CLUSTERS_READ,
        "write": Scope.CLUSTERS_WRITE,
        "test_connection": Scope.CLUSTERS_READ,
    }

    def get_queryset(self) -> QuerySet[Cluster]:
        return selectors.cluster_list()

    def perform_create(self, serializer: BaseSerializer[Cluster]) -> None:
        data = serializer.validated_data
        serializer.instance = services.cluster_register(
            name=data["name"],
            description=data.get("description", ""),
            context=data.get("context_name"),
            **{k: data.get(k) for k in _CREDENTIALS},
            in_cluster=bool(data.get("in_cluster")),
            allow_unreachable=bool(data.get("allow_unreachable")),
            **{k: data.get(k) for k in _METRICS},
            actor=self.request.user,
            source_ip=client_ip(self.request),
        )
        if any(k in data for k in _TRACE_STORE):
            serializer.instance = services.cluster_set_trace_store(
                cluster=serializer.instance,
                **{k: data.get(k) for k in _TRACE_STORE},
                actor=self.request.user,
                source_ip=client_ip(self.request),
            )

    @extend_schema(responses={201: ClusterCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().create(request, *args, **kwargs)
        cluster = Cluster.objects.get(pk=response.data["id"])
        warning = selectors.same_server_warning(cluster)
        response.data["warnings"] = [warning] if warning else []
        return response

    def perform_update(self, serializer: BaseSerializer[Cluster]) -> None:
        data = serializer.validated_data
        assert serializer.instance is not None
        serializer.instance = services.cluster_update(
            cluster=serializer.instance,
            name=data.get("name"),
            description=data.get("description"),
            context=data.get("context_name"),
            **{k: data.get(k) for k in _CREDENTIALS},
            in_cluster=bool(data.get("in_cluster")),
            allow_unreachable=bool(data.get("allow_unreachable")),
            actor=self.request.user,
            source_ip=client_ip(self.request),
        )
        if any(k in data for k in _METRICS):
            serializer.instance = services.cluster_set_metrics_source(
                cluster=serializer.instance,
                **{k: data.get(k) for k in _METRICS},
                actor=self.request.user,
                source_ip=client_ip(self.request),
            )
        if any(k in data for k in _TRACE_STORE):
            serializer.instance = services.cluster_set_trace_store(
                cluster=serializer.instance,
                **{k: data.get(k) for k in _TRACE_STORE},
                actor=self.request.user,
                source_ip=client_ip(self.request),
            )

    @extend_schema(parameters=[OpenApiParameter("confirm", bool, description="Also remove its topologies.")])
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        query = DeleteQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        services.cluster_delete(
            cluster=self.get_object(),
            confirm=query.validated_data["confirm"],
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=ConnectionResultSerializer)
    @action(detail=True, methods=["post"], url_path="test-connection")
    def test_connection(self, request: Request, pk: str | None = None) -> Response:
        """Version plus one authenticated call with the stored credentials; changes nothing."""
        result = services.cluster_test_connection(cluster=self.get_object())
        body = {
            "ok": result.ok,
            "version": result.version,
            "latency_ms": result.latency_ms,
            "message": result.message,
        }
        return Response(ConnectionResultSerializer(body).data)

    @extend_schema(request=None, responses=ClusterSerializer)
    @action(detail=True, methods=["post"], url_path="probe-metrics")
    def probe_metrics(self, request: Request, pk: str | None = None) -> Response:
        """Probe the metrics sources again (direct, proxy, Prometheus); the source in use is unchanged."""
        cluster = self.get_object()
        services.cluster_set_metrics_source(
            cluster=cluster,
            metrics_source=cluster.metrics_source,
            actor=request.user,
            source_ip=client_ip(request),
        )
        return Response(ClusterSerializer(selectors.cluster_list().get(pk=cluster.pk)).data)

    @extend_schema(request=None, responses=ClusterSerializer)
    @action(detail=True, methods=["post"])
    def check(self, request: Request, pk: str | None = None) -> Response:
        """Run the full check now (connectivity, permissions, CRDs, nodes) and return the updated cluster."""
        cluster = services.cluster_check(
            cluster_id=self.get_object().pk, actor=request.user, source_ip=client_ip(request)
        )
        return Response(ClusterSerializer(selectors.cluster_list().get(pk=cluster.pk)).data)

    @extend_schema(responses=InventorySerializer)
    @action(detail=True, methods=["get"])
    def inventory(self, request: Request, pk: str | None = None) -> Response:
        """Nodes with accelerator capacity, allocatable and in use, and totals per accelerator resource."""
        cluster = self.get_object()
        body = {
            "cluster": cluster.pk,
            "last_checked": cluster.last_checked,
            "accelerators": [
                {
                    "resource": t.resource,
                    "nodes": t.nodes,
                    "capacity": t.capacity,
                    "allocatable": t.allocatable,
                    "in_use": t.in_use,
                    "free": t.free,
                }
                for t in selectors.cluster_accelerators(cluster)
            ],
            "nodes": list(selectors.cluster_nodes(cluster)),
        }
        return Response(InventorySerializer(body).data)

    @extend_schema(responses=HealthCheckSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="health-history", pagination_class=None)
    def health_history(self, request: Request, pk: str | None = None) -> Response:
        """The latest health checks, newest first."""
        checks = selectors.cluster_health_history(self.get_object(), limit=100)
        return Response(HealthCheckSerializer(checks, many=True).data)
