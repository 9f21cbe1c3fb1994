"""Per-request traces: the gateway's span of each kept request, and the spans engines send over OTLP.

A trace is kept when the gateway's request ends (traces.sampling): a head-sampled fraction of normal
requests, and every slow or failed one. Spans are stored flat, found by trace id (no foreign key on
the ingest path); a Trace row holds what the gateway saw of the request and links its record.
"""

from __future__ import annotations

from django.db import models


class Kept(models.TextChoices):
    HEAD = "head", "Sampled (a fraction of normal requests)"
    SLOW = "slow", "Slow (over the topology's SLO)"
    FAILED = "failed", "Failed"


class Trace(models.Model):
    """A kept request as the gateway saw it (its own span): why it was kept, status, latency, tokens."""

    trace_id = models.CharField(max_length=32, unique=True)
    created = models.DateTimeField(db_index=True)
    topology = models.ForeignKey("topologies.Topology", null=True, blank=True, on_delete=models.SET_NULL)
    # The gateway's record of this request (filled once the recorder has written it; by trace id).
    gateway_request = models.ForeignKey(
        "gateway.GatewayRequest", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    gateway_span_id = models.CharField(max_length=16)
    kept = models.CharField(max_length=8, choices=Kept.choices)
    reason = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=256)
    endpoint = models.CharField(max_length=32)
    backend = models.CharField(max_length=16)
    status = models.PositiveSmallIntegerField()
    error_code = models.CharField(max_length=64, blank=True)
    stream = models.BooleanField(default=False)
    latency_ms = models.FloatField()
    ttft_ms = models.FloatField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # Prompt tokens served from the prefix cache, as the answer's usage said (None: it did not say).
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["topology", "kept", "-created"], name="traces_topology_kept")]

    def __str__(self) -> str:
        return f"trace {self.trace_id} ({self.kept})"


class Span(models.Model):
    """One span of a kept trace: the gateway's, or one an engine or router sent over OTLP."""

    trace_id = models.CharField(max_length=32, db_index=True)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=128)
    service_name = models.CharField(max_length=128, blank=True)
    instance = models.CharField(max_length=128, blank=True)
    kind = models.PositiveSmallIntegerField(default=0)  # OTLP SpanKind: 1 internal, 2 server, 3 client
    start = models.DateTimeField()
    end = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(default=0)  # OTLP: 0 unset, 1 ok, 2 error
    status_message = models.CharField(max_length=200, blank=True)
    attributes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["start"]
        indexes = [models.Index(fields=["start"], name="traces_span_start")]

    def __str__(self) -> str:
        return f"{self.name} {self.span_id}"
