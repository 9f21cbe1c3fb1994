"""Registered clusters, their nodes' accelerators, and the history of health checks."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from controlplane.crypto import EncryptedTextField

NAME_VALIDATOR = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    "use lowercase letters, digits and dashes (e.g. prod-ascend-a), starting and ending with a letter/digit",
)


class AuthMethod(models.TextChoices):
    KUBECONFIG = "kubeconfig", "Kubeconfig (one context)"
    TOKEN = "token", "API server URL + bearer token"
    IN_CLUSTER = "in_cluster", "In-cluster service account"


class HealthState(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    UNREACHABLE = "unreachable", "Unreachable"
    UNKNOWN = "unknown", "Not checked yet"


class MetricsSource(models.TextChoices):
    DIRECT = "direct", "Direct (pod IPs reachable: Tandem in the cluster, or a routed pod network)"
    PROXY = "proxy", "API-server proxy (pods/{name}:{port}/proxy/metrics; needs get on pods/proxy)"
    PROMETHEUS = "prometheus", "Prometheus (the cluster's own, queried with PromQL over its HTTP API)"


class TraceStore(models.TextChoices):
    EMBEDDED = "embedded", "Tandem's own (its OTLP receiver keeps the spans)"
    JAEGER = "jaeger", "Jaeger (its HTTP query API, GET /api/traces/{id})"
    TEMPO = "tempo", "Tempo (its HTTP query API, GET /api/traces/{id}, OTLP JSON)"


class Cluster(models.Model):
    name = models.CharField(max_length=63, unique=True, validators=[NAME_VALIDATOR])
    description = models.CharField(max_length=500, blank=True)
    auth_method = models.CharField(max_length=16, choices=AuthMethod.choices)
    server = models.CharField(
        max_length=500, blank=True, help_text="API server URL, e.g. https://10.0.0.1:6443"
    )
    context_name = models.CharField(max_length=253, blank=True, help_text="Kubeconfig context used")
    default_namespace = models.CharField(max_length=63, blank=True)

    # Credentials: encrypted at rest, write-only everywhere.
    kubeconfig = EncryptedTextField(blank=True, default="")
    token = EncryptedTextField(blank=True, default="")
    ca_bundle = EncryptedTextField(blank=True, default="")
    client_cert = EncryptedTextField(blank=True, default="")
    client_key = EncryptedTextField(blank=True, default="")
    credential_version = models.CharField(max_length=32, default="", editable=False)

    # Where live metrics are read from (telemetry.sources); Prometheus credentials encrypted like the above.
    metrics_source = models.CharField(
        max_length=16, choices=MetricsSource.choices, default=MetricsSource.DIRECT
    )
    prometheus_url = models.CharField(
        max_length=500, blank=True, help_text="Prometheus base URL, e.g. https://prometheus.example:9090"
    )
    prometheus_token = EncryptedTextField(blank=True, default="")
    prometheus_username = EncryptedTextField(blank=True, default="")
    prometheus_password = EncryptedTextField(blank=True, default="")
    metrics_probe = models.JSONField(
        default=dict,
        blank=True,
        help_text="{recommended, reason, checked, results: {direct|proxy|prometheus: {ok, message}}}",
    )

    # Where the engines' spans are read from when Tandem's own store has none (traces.store).
    trace_store = models.CharField(max_length=16, choices=TraceStore.choices, default=TraceStore.EMBEDDED)
    trace_store_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="Jaeger or Tempo query base URL, e.g. http://tempo.observability:3200",
    )
    trace_store_token = EncryptedTextField(blank=True, default="")

    health_state = models.CharField(max_length=16, choices=HealthState.choices, default=HealthState.UNKNOWN)
    last_error = models.TextField(blank=True, help_text="Why the cluster is not healthy, in words")
    version = models.CharField(max_length=64, blank=True)
    kthena_installed = models.BooleanField(null=True, default=None)
    installed_crds = models.JSONField(default=list, blank=True)
    permissions = models.JSONField(
        default=list, blank=True, help_text="[{verb, group, resource, allowed, reason}] from access reviews"
    )
    last_checked = models.DateTimeField(null=True, blank=True)
    last_latency_ms = models.FloatField(null=True, blank=True)

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def metrics_probe_rows(self) -> list[tuple[str, dict[str, object]]]:
        """The last probe's result per source, in the order direct, proxy, prometheus."""
        results = (self.metrics_probe or {}).get("results") or {}
        return [(name, results[name]) for name in MetricsSource.values if name in results]

    @property
    def metrics_recommendation(self) -> dict[str, str] | None:
        """The last probe's advice, while it still applies: none once the source in use is the one it
        recommends, or the probe found the source in use answering."""
        probe = self.metrics_probe or {}
        recommended = str(probe.get("recommended") or "")
        if not recommended or recommended == self.metrics_source:
            return None
        current = (probe.get("results") or {}).get(self.metrics_source) or {}
        if current.get("ok"):
            return None
        return {"source": recommended, "reason": str(probe.get("reason") or "")}

    @property
    def permissions_denied(self) -> list[dict[str, object]]:
        return [p for p in self.permissions if not p.get("allowed")]

    @property
    def permissions_summary(self) -> str:
        if not self.permissions:
            return "not checked"
        denied = len(self.permissions_denied)
        total = len(self.permissions)
        return "all allowed" if not denied else f"{denied} of {total} denied"


class NodeInventory(models.Model):
    """One node as last seen; accelerator counts are for ``accelerator_resource`` (the node's main one)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    labels = models.JSONField(default=dict, blank=True)
    ready = models.BooleanField(default=False)
    schedulable = models.BooleanField(default=True)
    accelerator_resource = models.CharField(max_length=253, blank=True)
    capacity = models.PositiveIntegerField(default=0)
    allocatable = models.PositiveIntegerField(default=0)
    in_use = models.PositiveIntegerField(default=0)
    accelerators = models.JSONField(
        default=dict,
        blank=True,
        help_text="{resource: {capacity, allocatable, in_use}} for every accelerator",
    )
    seen = models.DateTimeField()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_node_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.name}"

    @property
    def free(self) -> int:
        return max(self.allocatable - self.in_use, 0)

    @property
    def used_percent(self) -> int:
        return round(100 * self.in_use / self.allocatable) if self.allocatable else 0


class ClusterHealthCheck(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="health_checks")
    checked_at = models.DateTimeField(db_index=True)
    state = models.CharField(max_length=16, choices=HealthState.choices)
    latency_ms = models.FloatField(null=True, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["-checked_at", "-id"]
        indexes = [models.Index(fields=["cluster", "-checked_at"])]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.state} at {self.checked_at:%Y-%m-%d %H:%M:%S}"
