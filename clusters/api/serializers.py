"""Cluster API shapes. Credentials are write-only: no response ever carries them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from clusters.metrics import CHOICES as METRICS_CHOICES
from clusters.models import Cluster, ClusterHealthCheck, NodeInventory

_CRED_STYLE = {"base_template": "textarea.html"}


class ClusterSerializer(serializers.ModelSerializer[Cluster]):
    node_count = serializers.SerializerMethodField()
    permissions_summary = serializers.CharField(read_only=True)
    kubeconfig = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        style=_CRED_STYLE,
        help_text="Kubeconfig file contents (YAML). Exec plugins, auth providers and "
        "insecure-skip-tls-verify are refused.",
    )
    token = serializers.CharField(
        write_only=True, required=False, allow_blank=True, help_text="Bearer token (with server)."
    )
    ca_bundle = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        style=_CRED_STYLE,
        help_text="PEM CA bundle that signed the API server's certificate (required for https://).",
    )
    in_cluster = serializers.BooleanField(
        write_only=True,
        required=False,
        default=False,
        help_text="Use the service account of the pod Tandem runs in.",
    )
    allow_unreachable = serializers.BooleanField(
        write_only=True,
        required=False,
        default=False,
        help_text="Save even when the connection test fails (the cluster starts as unreachable).",
    )
    metrics_source = serializers.CharField(
        required=False,
        help_text="Where live metrics come from: direct (pod IPs reachable), proxy (the API server's "
        "pods proxy; needs get on pods/proxy), prometheus (PromQL over prometheus_url), or auto "
        "(default at registration: the recommended source of the probe). Answers the source in use.",
    )
    prometheus_url = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Prometheus base URL (required with metrics_source prometheus), e.g. https://prom.example:9090.",
    )
    prometheus_token = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        help_text="Bearer token for Prometheus (stored encrypted).",
    )
    prometheus_username = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        help_text="Basic auth user for Prometheus (encrypted).",
    )
    prometheus_password = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Basic auth password for Prometheus (stored encrypted).",
    )
    trace_store = serializers.CharField(
        required=False,
        help_text="Where the waterfall reads engine spans when Tandem's own store has none: embedded "
        "(default: Tandem's OTLP receiver), jaeger or tempo (their HTTP query API at trace_store_url).",
    )
    trace_store_url = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Jaeger or Tempo query base URL (required with jaeger or tempo), e.g. http://tempo:3200.",
    )
    trace_store_token = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        help_text="Bearer token for the trace store (stored encrypted).",
    )
    metrics_probe = serializers.JSONField(
        read_only=True,
        help_text="What the last probe found per source ({ok, message}) and the source it recommends.",
    )

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "description",
            "auth_method",
            "server",
            "context_name",
            "default_namespace",
            "health_state",
            "last_error",
            "version",
            "kthena_installed",
            "installed_crds",
            "permissions",
            "permissions_summary",
            "last_checked",
            "last_latency_ms",
            "node_count",
            "created",
            "updated",
            "kubeconfig",
            "token",
            "ca_bundle",
            "in_cluster",
            "allow_unreachable",
            "metrics_source",
            "prometheus_url",
            "prometheus_token",
            "prometheus_username",
            "prometheus_password",
            "metrics_probe",
            "trace_store",
            "trace_store_url",
            "trace_store_token",
        ]
        read_only_fields = [
            "auth_method",
            "default_namespace",
            "health_state",
            "last_error",
            "version",
            "kthena_installed",
            "installed_crds",
            "permissions",
            "last_checked",
            "last_latency_ms",
            "created",
            "updated",
        ]
        extra_kwargs: dict[str, dict[str, Any]] = {
            "name": {
                "validators": [],
                "help_text": "Lowercase letters, digits and dashes, e.g. prod-ascend-a.",
            },
            "context_name": {
                "required": False,
                "help_text": "Kubeconfig context to use (default: the file's current-context); "
                "afterwards, the context that was used.",
            },
            "server": {
                "required": False,
                "help_text": "API server URL (https://; http:// only on loopback).",
            },
        }

    def validate_metrics_source(self, value: str) -> str:
        if value.strip().lower() not in METRICS_CHOICES:
            raise serializers.ValidationError(
                f"{value!r} is not one of {', '.join(METRICS_CHOICES)}; pick one"
            )
        return value.strip().lower()

    def get_node_count(self, obj: Cluster) -> int:
        annotated = getattr(obj, "node_count", None)
        return int(annotated) if annotated is not None else obj.nodes.count()


class ClusterCreatedSerializer(ClusterSerializer):
    """The answer to a registration: the cluster, and warnings (e.g. the same API server twice)."""

    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta(ClusterSerializer.Meta):
        fields = [*ClusterSerializer.Meta.fields, "warnings"]
        read_only_fields = [*ClusterSerializer.Meta.read_only_fields, "warnings"]


class NodeInventorySerializer(serializers.ModelSerializer[NodeInventory]):
    free = serializers.IntegerField(read_only=True)

    class Meta:
        model = NodeInventory
        fields = [
            "name",
            "labels",
            "ready",
            "schedulable",
            "accelerator_resource",
            "capacity",
            "allocatable",
            "in_use",
            "free",
            "accelerators",
            "seen",
        ]


class AcceleratorTotalSerializer(serializers.Serializer[Any]):
    resource = serializers.CharField()
    nodes = serializers.IntegerField()
    capacity = serializers.IntegerField()
    allocatable = serializers.IntegerField()
    in_use = serializers.IntegerField()
    free = serializers.IntegerField()


class InventorySerializer(serializers.Serializer[Any]):
    cluster = serializers.IntegerField()
    last_checked = serializers.DateTimeField(allow_null=True)
    accelerators = AcceleratorTotalSerializer(many=True)
    nodes = NodeInventorySerializer(many=True)


class HealthCheckSerializer(serializers.ModelSerializer[ClusterHealthCheck]):
    class Meta:
        model = ClusterHealthCheck
        fields = ["checked_at", "state", "latency_ms", "message"]


class ConnectionResultSerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField()
    version = serializers.CharField()
    latency_ms = serializers.FloatField(allow_null=True)
    message = serializers.CharField()


class DeleteQuerySerializer(serializers.Serializer[Any]):
    confirm = serializers.BooleanField(
        required=False, default=False, help_text="Also remove the topologies that run on the cluster."
    )
