"""How the gateway reaches each topology, its fallback, and what it served."""

from __future__ import annotations

from django.db import models

from controlplane.crypto import EncryptedTextField


class Backend(models.TextChoices):
    CLUSTER = "cluster", "Cluster"
    FALLBACK = "fallback", "Fallback"
    NONE = "none", "Not dispatched"


class BreakerState(models.TextChoices):
    CLOSED = "closed", "Closed (cluster in use)"
    OPEN = "open", "Open (cluster skipped)"
    HALF_OPEN = "half_open", "Half-open (probing the cluster)"


class Route(models.Model):
    """The gateway's settings of one topology: where it serves, its aliases, and its fallback."""

    topology = models.OneToOneField(
        "topologies.Topology", on_delete=models.CASCADE, related_name="gateway_route"
    )
    aliases = models.JSONField(default=list, blank=True, help_text="Other model names clients may use.")
    endpoint_url = models.CharField(
        max_length=300,
        blank=True,
        help_text="The serving endpoint (router or Ingress URL); empty: discovered from the cluster.",
    )
    discovered_url = models.CharField(max_length=300, blank=True)
    # The last discovery could not read the cluster (403, 5xx, timeout, unreachable): the discovered
    # endpoint is kept, unconfirmed since then, for this reason. Empty/null: confirmed at the last look.
    discovered_stale_reason = models.CharField(max_length=500, blank=True)
    discovered_stale_since = models.DateTimeField(null=True, blank=True)
    fallback_base_url = models.CharField(
        max_length=300, blank=True, help_text="OpenAI-compatible, ending in /v1."
    )
    fallback_api_key = EncryptedTextField(blank=True, default="")
    fallback_model = models.CharField(
        max_length=256, blank=True, help_text="Model name at the fallback upstream."
    )
    fallback_on_429 = models.BooleanField(default=False)
    timeout_seconds = models.PositiveIntegerField(default=60, help_text="Upstream wait for the first byte.")
    breaker_failures = models.PositiveIntegerField(default=3, help_text="Consecutive failures that open it.")
    breaker_open_seconds = models.PositiveIntegerField(default=15, help_text="How long it stays open.")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"route of {self.topology_id}"


class GatewayRequest(models.Model):
    """One request through the gateway (no bodies, no headers): usage, latency and who served it."""

    created = models.DateTimeField(db_index=True)
    key_id = models.UUIDField(null=True, blank=True)  # indexed with created (Meta)
    model = models.CharField(max_length=256)
    topology = models.ForeignKey("topologies.Topology", null=True, blank=True, on_delete=models.SET_NULL)
    endpoint = models.CharField(max_length=32)
    backend = models.CharField(max_length=16, choices=Backend.choices)
    status = models.PositiveSmallIntegerField()
    error_code = models.CharField(max_length=64, blank=True)
    stream = models.BooleanField(default=False)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    ttft_ms = models.FloatField(null=True, blank=True)  # streams only: a whole answer has no first token
    latency_ms = models.FloatField()
    # Made by the topology's verification probes (no key): charted apart from applications' requests.
    probe = models.BooleanField(default=False)
    # The W3C trace this request was a span of (gateway.tracecontext); its stored spans are in traces/.
    trace_id = models.CharField(max_length=32, blank=True, default="")
    # The request's prefix group (gateway.prefixgroup): a hash of its leading content; "" when it had none.
    prefix_group = models.CharField(max_length=16, blank=True, default="")

    class Meta:
        ordering = ["-created"]
        # The charts read one topology's or one key's records over a time window; a trace finds its
        # gateway requests by trace id.
        indexes = [
            models.Index(fields=["topology", "-created"]),
            models.Index(fields=["key_id", "created"]),
            models.Index(fields=["trace_id"], name="gateway_req_trace_id"),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.status} via {self.backend}"


class BreakerEvent(models.Model):
    """A change of a topology's circuit breaker, for the topology page and the overview."""

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    topology = models.ForeignKey(
        "topologies.Topology", on_delete=models.CASCADE, related_name="breaker_events"
    )
    state = models.CharField(max_length=16, choices=BreakerState.choices)
    reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.topology_id} {self.state}"


class ProbeState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"
    ERROR = "error", "Could not run"


class ProbeRun(models.Model):
    """One click of Verify: the probes asked for, their results, comparable run to run."""

    topology = models.ForeignKey("topologies.Topology", on_delete=models.CASCADE, related_name="probe_runs")
    kinds = models.JSONField(default=list)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=ProbeState.choices, default=ProbeState.QUEUED)
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey("accounts.User", null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"probe run {self.pk} of {self.topology_id}"
