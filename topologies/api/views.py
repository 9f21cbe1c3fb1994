"""Topology API: thin views over topologies.services and selectors.

Roles: viewers read; operators run preflight (it changes nothing, but it calls the cluster's API
with Tandem's credentials, so it needs the same role on this API and on the pages), create and change
topologies (every change is a new revision, nothing touches the cluster until a deploy) and delete
them (which removes their cluster objects through a delete job, answered with 202).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import kube
from accounts.roles import Role
from clusters.models import Cluster
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from keys.scopes import Scope
from topologies import adoption, adoption_services, export, selectors, services
from topologies.api.serializers import (
    AdoptableQuerySerializer,
    AdoptableSerializer,
    AdoptRequestSerializer,
    DeleteJobSerializer,
    DiffQuerySerializer,
    DiffSerializer,
    ImportCreatedSerializer,
    ImportPreviewSerializer,
    ImportRequestSerializer,
    PreflightResultSerializer,
    PreflightRevisionSerializer,
    PreflightSpecSerializer,
    ReleasedSerializer,
    RevisionListSerializer,
    RevisionSerializer,
    TopologyCreateSerializer,
    TopologySerializer,
    TopologyUpdateSerializer,
)
from topologies.filtersets import TopologyFilterSet
from topologies.import_selectors import import_node_findings
from topologies.importing import import_manifests
from topologies.models import Revision, Topology
from topologies.preflight import Finding
from topologies.spec import SpecError


def preflight_body(findings: list[Finding]) -> dict[str, Any]:
    errors = sum(1 for f in findings if f.blocking)
    return {
        "ok": errors == 0,
        "error_count": errors,
        "warning_count": len(findings) - errors,
        "findings": [f.as_dict() for f in findings],
    }


def spec_error(error: SpecError) -> DomainError:
    fields = {f"spec.{path}": messages for path, messages in error.errors.items()}
    first_path, first = next(iter(fields.items()))
    return DomainError(f"{first_path}: {first[0]}", code="invalid", fields=fields)


class TopologyViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Topology],
):
    """P/D topologies. Viewers read; operators preflight, create, change and delete."""

    serializer_class = TopologySerializer
    filterset_class = TopologyFilterSet
    write_role = Role.OPERATOR
    action_roles = {
        "preflight": Role.OPERATOR,
        "preflight_spec": Role.OPERATOR,
        "import_yaml": Role.OPERATOR,
        "adoptable": Role.OPERATOR,
        "adopt": Role.OPERATOR,
        "release": Role.OPERATOR,
    }
    required_scopes = {
        "import_yaml": Scope.TOPOLOGIES_WRITE,
        "adoptable": Scope.TOPOLOGIES_READ,
        "adopt": Scope.TOPOLOGIES_WRITE,
        "release": Scope.TOPOLOGIES_WRITE,
        "read": Scope.TOPOLOGIES_READ,
        "write": Scope.TOPOLOGIES_WRITE,
        "preflight": Scope.TOPOLOGIES_READ,
        "preflight_spec": Scope.TOPOLOGIES_READ,
    }

    def get_queryset(self) -> QuerySet[Topology]:
        return selectors.topology_list()

    @extend_schema(request=TopologyCreateSerializer, responses={201: TopologySerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = TopologyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        topology = services.topology_create(
            cluster=data.validated_data["cluster"],
            spec=data.validated_data["spec"],
            actor=request.user,
            source_ip=client_ip(request),
            message=data.validated_data.get("message", ""),
        )
        return Response(TopologySerializer(topology).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TopologyUpdateSerializer, responses={200: TopologySerializer})
    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        topology = self.get_object()
        data = TopologyUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            updated = services.topology_update(
                topology=topology,
                spec=data.validated_data["spec"],
                actor=request.user,
                message=data.validated_data.get("message", ""),
                source_ip=client_ip(request),
            )
        except SpecError as error:
            raise spec_error(error) from None
        return Response(TopologySerializer(selectors.topology_list().get(pk=updated.pk)).data)

    @extend_schema(request=TopologyUpdateSerializer, responses={200: TopologySerializer})
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.update(request, *args, **kwargs)

    @extend_schema(
        responses={
            202: OpenApiResponse(
                DeleteJobSerializer, description="A delete job; follow it at /api/v1/deployments/{id}/"
            )
        }
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        from deployments.services import topology_delete_start

        topology = self.get_object()
        job = topology_delete_start(topology=topology, actor=request.user, source_ip=client_ip(request))
        return Response(
            {"deployment": job.pk, "state": job.state, "url": f"/api/v1/deployments/{job.pk}/"},
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(
        operation_id="topologies_preflight",
        request=PreflightRevisionSerializer,
        responses={200: PreflightResultSerializer},
    )
    @action(detail=True, methods=["post"])
    def preflight(self, request: Request, pk: str | None = None) -> Response:
        topology = self.get_object()
        data = PreflightRevisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        revision: Revision | None = None
        if "revision" in data.validated_data:
            revision = _revision(topology, data.validated_data["revision"], field="revision")
        return Response(preflight_body(services.topology_preflight(topology=topology, revision=revision)))

    @extend_schema(
        operation_id="topologies_preflight_spec",
        request=PreflightSpecSerializer,
        responses={200: PreflightResultSerializer},
    )
    @action(detail=False, methods=["post"], url_path="preflight")
    def preflight_spec(self, request: Request) -> Response:
        data = PreflightSpecSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        findings = services.spec_preflight(
            cluster=data.validated_data["cluster"], spec=data.validated_data["spec"]
        )
        return Response(preflight_body(findings))

    @extend_schema(
        operation_id="topologies_import",
        request=ImportRequestSerializer,
        responses={200: ImportPreviewSerializer, 201: ImportCreatedSerializer},
        description="Preview (preview=true, the default) or create (preview=false) a topology from "
        "Kthena or Deployment YAML. "
        "The report lists what was mapped into the spec, what is kept verbatim (including each role's "
        "pod-template overlay), what cannot be represented, each field the render writes differently "
        "(changed) and the values left unset for the operator (questions); verdict counts them. With a "
        "cluster, a preview also checks the accelerator resources against that cluster's nodes (findings).",
    )
    @action(detail=False, methods=["post"], url_path="import")
    def import_yaml(self, request: Request) -> Response:
        data = ImportRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        if values["preview"]:
            result = import_manifests(values["yaml"], overrides=values.get("overrides"))
            body = result.as_dict()
            found = []
            if result.ok and values.get("cluster") is not None:  # resource names against its nodes
                found = import_node_findings(cluster=values["cluster"], spec=result.spec)
            body["findings"] = [f.as_dict() for f in found]
            return Response(body)
        try:
            topology, result = services.topology_import(
                cluster=values["cluster"],
                text=values["yaml"],
                overrides=values.get("overrides"),
                actor=request.user,
                source_ip=client_ip(request),
                message=values.get("message", ""),
            )
        except SpecError as error:
            fields = {k if k == "yaml" else f"spec.{k}": v for k, v in error.errors.items()}
            first_path, first = next(iter(fields.items()))
            raise DomainError(f"{first_path}: {first[0]}", code="invalid", fields=fields) from None
        return Response(
            {"topology": TopologySerializer(topology).data, "report": result.report.as_dict()},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        operation_id="topologies_adoptable",
        parameters=[OpenApiParameter("cluster", int, required=True)],
        responses={200: AdoptableSerializer(many=True)},
        description="Kthena ModelServings and role-labelled Deployments on the cluster that Tandem does not "
        "manage, each with what an import of it gives. Calls the cluster's API (operators).",
    )
    @action(detail=False, methods=["get"], pagination_class=None, filterset_class=None)
    def adoptable(self, request: Request) -> Response:
        from clusters.selectors import cluster_connection

        query = AdoptableQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        one = query.validated_data.get("cluster")
        rows: list[dict[str, Any]] = []
        for cluster in [one] if one is not None else list(Cluster.objects.order_by("name")):
            try:
                found = adoption.adoptable(cluster_connection(cluster))
            except kube.KubeError as error:
                message = f"cannot list workloads on {cluster.name}: {error.message}"
                if one is not None:
                    raise DomainError(message, status_code=502, code="cluster_error") from None
                rows.append(adoption.unreadable(cluster.pk, message))
                continue
            rows += [{"cluster": cluster.pk, **c.as_dict()} for c in found]
        return Response(rows)

    @extend_schema(
        operation_id="topologies_adopt",
        request=AdoptRequestSerializer,
        responses={
            201: TopologySerializer,
            404: OpenApiResponse(
                description="The workload named is not there to adopt (gone, or Tandem manages it already)."
            ),
        },
        description="Adopt a running workload as a topology: its objects as they run become revision 1 "
        "(running), Tandem takes ownership of their fields by server-side apply, no pod restarts.",
    )
    @action(detail=False, methods=["post"])
    def adopt(self, request: Request) -> Response:
        data = AdoptRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            topology = adoption_services.topology_adopt(
                cluster=values["cluster"],
                kind=values["kind"],
                namespace=values["namespace"],
                name=values["name"],
                overrides=values.get("overrides"),
                actor=request.user,
                source_ip=client_ip(request),
            )
        except SpecError as error:
            raise spec_error(error) from None
        return Response(TopologySerializer(topology).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="topologies_release",
        request=None,
        responses={200: ReleasedSerializer},
        description="Hand an adopted topology's objects back unchanged (Tandem's labels and field ownership "
        "go) and forget the topology.",
    )
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        topology = self.get_object()
        released = adoption_services.topology_release(
            topology=topology, actor=request.user, source_ip=client_ip(request)
        )
        return Response({"released": released})


def _topology(pk: int) -> Topology:
    return get_object_or_404(Topology.objects.all(), pk=pk)


def _revision(topology: Topology, number: int, *, field: str) -> Revision:
    """The topology's revision ``number``, or a 404 naming ``field`` and where to find valid numbers."""
    revision = selectors.revision_get(topology, number)
    if revision is None:
        raise DomainError(
            f"topology {topology.name} has no revision {number}",
            code="not_found",
            status_code=404,
            fields={field: ["use a number from the revisions list"]},
        )
    return revision


class RevisionList(APIView):
    """Revisions of one topology, newest first."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ}

    @extend_schema(responses={200: RevisionListSerializer(many=True)})
    def get(self, request: Request, pk: int) -> Response:
        revisions = selectors.topology_revisions(_topology(pk))
        return Response(RevisionListSerializer(revisions, many=True).data)


class RevisionDetail(APIView):
    """One revision with its spec snapshot and rendered manifests."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ}

    @extend_schema(responses={200: RevisionSerializer})
    def get(self, request: Request, pk: int, number: int) -> Response:
        revision = _revision(_topology(pk), number, field="number")
        return Response(RevisionSerializer(revision).data)


class RevisionDiff(APIView):
    """Unified diff of two revisions' manifests (YAML, stable key order)."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ}

    @extend_schema(
        parameters=[OpenApiParameter("from", int, required=True), OpenApiParameter("to", int, required=True)],
        responses={200: DiffSerializer},
    )
    def get(self, request: Request, pk: int) -> Response:
        topology = _topology(pk)
        query = DiffQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        numbers = {"from": query.validated_data["from_"], "to": query.validated_data["to"]}
        found = {key: _revision(topology, number, field=key) for key, number in numbers.items()}
        return Response(
            {
                "topology": topology.pk,
                "from_revision": numbers["from"],
                "to_revision": numbers["to"],
                "diff": selectors.revision_diff(found["from"], found["to"]),
            }
        )


class RevisionExport(APIView):
    """A revision as YAML: its manifests as one kubectl-apply-ready stream, or its spec."""

    required_scopes = {"read": Scope.TOPOLOGIES_READ}
    what = "manifests"

    def get(self, request: Request, pk: int, number: int) -> HttpResponse:
        topology = _topology(pk)
        revision = _revision(topology, number, field="number")
        text, filename = export.revision_yaml(revision, self.what)
        response = HttpResponse(text, content_type="application/yaml; charset=utf-8")
        download = request.query_params.get("download")
        if download is not None and download not in ("true", "false", "1", "0"):
            raise ValidationError({"download": ["must be true or false"]})
        if download in ("1", "true"):
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response


_DOWNLOAD = OpenApiParameter("download", bool, description="true: served as an attachment (a .yaml file)")


class RevisionManifestsExport(RevisionExport):
    """A revision's manifests as one YAML stream, ready for ``kubectl apply -f``."""

    what = "manifests"

    @extend_schema(
        operation_id="topologies_revisions_manifests_yaml",
        parameters=[_DOWNLOAD],
        responses={(200, "application/yaml"): OpenApiTypes.STR},
    )
    def get(self, request: Request, pk: int, number: int) -> HttpResponse:
        return super().get(request, pk, number)


class RevisionSpecExport(RevisionExport):
    """A revision's topology spec as YAML."""

    what = "spec"

    @extend_schema(
        operation_id="topologies_revisions_spec_yaml",
        parameters=[_DOWNLOAD],
        # One YAML document holding the stored spec: described by its schema, as a YAML-aware client
        # (or validator) reads it, not as an opaque string.
        responses={(200, "application/yaml"): {"$ref": "#/components/schemas/StoredTopologySpec"}},
    )
    def get(self, request: Request, pk: int, number: int) -> HttpResponse:
        return super().get(request, pk, number)
