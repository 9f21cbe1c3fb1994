"""Topologies (the desired P/D deployment) and their immutable revisions (spec + rendered manifests)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Engine(models.TextChoices):
    VLLM = "vllm", "vLLM"
    VLLM_ASCEND = "vllm-ascend", "vLLM-Ascend"
    SGLANG = "sglang", "SGLang"
    MINDIE = "mindie", "MindIE"


class Backend(models.TextChoices):
    KTHENA = "kthena", "Kthena (ModelServing / ModelServer / ModelRoute)"
    DEPLOYMENTS = "deployments", "Plain Deployments + Services"


class KvConnector(models.TextChoices):
    MOONCAKE = "mooncake", "Mooncake transfer engine"
    MOONCAKE_STORE = "mooncake-store", "Mooncake Store (shared KV pool)"
    NIXL = "nixl", "NIXL"
    LMCACHE = "lmcache", "LMCache"
    LLM_DATADIST = "llm-datadist", "LLM-DataDist (Ascend CANN)"
    NONE = "none", "None (aggregated serving)"


class DriftState(models.TextChoices):
    UNKNOWN = "unknown", "Unknown"
    IN_SYNC = "in_sync", "In sync"
    DRIFTED = "drifted", "Drifted"


class Topology(models.Model):
    name = models.CharField(max_length=40)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.PROTECT, related_name="topologies")
    namespace = models.CharField(max_length=63)
    model_name = models.CharField(max_length=256, help_text="Served model name clients ask for.")
    engine = models.CharField(max_length=16, choices=Engine.choices)
    image = models.CharField(max_length=512)
    backend = models.CharField(max_length=16, choices=Backend.choices)
    kv_connector = models.CharField(max_length=16, choices=KvConnector.choices)
    spec = models.JSONField(help_text="The full validated TopologySpec (topologies.spec).")
    slo_ttft_ms = models.PositiveIntegerField()
    slo_tbt_ms = models.PositiveIntegerField()
    current_revision = models.ForeignKey(
        "topologies.Revision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The desired revision (the latest saved one).",
    )
    deployed_revision = models.ForeignKey(
        "topologies.Revision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The last revision that deployed successfully.",
    )
    pod_selector = models.CharField(
        max_length=500,
        blank=True,
        help_text="Label selector of the topology's pods when they are not Tandem's own (an adopted "
        "workload whose pods were left running); empty: Tandem's topology label.",
    )
    adopted_from = models.JSONField(
        default=list,
        blank=True,
        help_text="The objects as they were when adopted (kind, namespace, name), released on request.",
    )
    drift_state = models.CharField(max_length=16, choices=DriftState.choices, default=DriftState.UNKNOWN)
    drift_detail = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="topology_name_unique_per_cluster"),
        ]

    def __str__(self) -> str:
        return self.name


class RevisionImmutable(Exception):
    """Raised when code tries to change a saved revision."""


class RevisionQuerySet(models.QuerySet["Revision"]):
    def update(self, **kwargs: Any) -> int:
        raise RevisionImmutable("revisions are immutable; save a new revision instead")


class Revision(models.Model):
    topology = models.ForeignKey(Topology, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    spec = models.JSONField()
    manifests = models.JSONField(help_text="Rendered Kubernetes objects, in apply order.")
    message = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    objects = RevisionQuerySet.as_manager()

    class Meta:
        ordering = ["topology", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["topology", "number"], name="revision_number_unique"),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="revision_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.topology.name} r{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and not self._state.adding:
            raise RevisionImmutable(f"revision {self.number} of topology {self.topology_id} is immutable")
        super().save(*args, **kwargs)
