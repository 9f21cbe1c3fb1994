"""Telemetry storage.

Schema choice: a narrow ``Series`` (topology, name) dictionary plus ``Point`` rows (series, ts,
value) whose primary key IS the composite (series, ts) index — no surrogate id, no second index.

- Append: one collection is one multi-row INSERT of narrow rows; new series (a pod of a new revision,
  a new link) cost one dictionary row, nothing else changes shape — unlike a row-per-timestamp array,
  whose columns would have to track pods coming and going with every deploy and rebalance.
- Range reads: "series a, b of topology T between t0 and t1" is one index range scan per series on
  the primary key, independent of how many other series the topology has.
- Retention: raw points older than 24 h are deleted per series through the same index
  (``series_id = s AND ts < cutoff``); 1-minute ``Rollup`` rows (avg/min/max/count) are kept 30 days.
- Portable: plain columns work on PostgreSQL (services mode) and SQLite (standalone mode) alike.
"""

from __future__ import annotations

from django.db import models


class Series(models.Model):
    topology = models.ForeignKey(
        "topologies.Topology", on_delete=models.CASCADE, related_name="telemetry_series"
    )
    name = models.CharField(max_length=200, help_text="See telemetry.series for the naming scheme.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["topology", "name"], name="telemetry_series_unique_name")
        ]
        verbose_name_plural = "series"

    def __str__(self) -> str:
        return f"{self.topology_id}:{self.name}"


class Point(models.Model):
    """One raw value (kept 24 h)."""

    pk = models.CompositePrimaryKey("series_id", "ts")
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="+")
    ts = models.DateTimeField()
    value = models.FloatField()

    def __str__(self) -> str:
        return f"{self.series_id}@{self.ts.isoformat()}={self.value}"


class Rollup(models.Model):
    """One minute of a series (kept 30 days): mean, min, max and the number of raw points."""

    pk = models.CompositePrimaryKey("series_id", "ts")
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="+")
    ts = models.DateTimeField(help_text="Start of the minute.")
    avg = models.FloatField()
    min = models.FloatField()
    max = models.FloatField()
    count = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.series_id}@{self.ts.isoformat()} avg={self.avg}"


class AlertMetric(models.TextChoices):
    TTFT = "ttft", "TTFT p95"
    TBT = "tbt", "TBT p95"


class TelemetryAlert(models.Model):
    """An SLO breach: raised after N violated intervals in a row, resolved after N good ones."""

    topology = models.ForeignKey(
        "topologies.Topology", on_delete=models.CASCADE, related_name="telemetry_alerts"
    )
    metric = models.CharField(max_length=8, choices=AlertMetric.choices)
    target_ms = models.FloatField(help_text="The SLO target at the time it was raised.")
    observed_ms = models.FloatField(help_text="The p95 that raised it.")
    peak_ms = models.FloatField(help_text="The worst p95 seen while open.")
    message = models.CharField(max_length=300)
    raised = models.DateTimeField(db_index=True)
    resolved = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-raised", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["topology", "metric"],
                condition=models.Q(resolved__isnull=True),
                name="telemetry_alert_one_open_per_metric",
            )
        ]

    def __str__(self) -> str:
        return self.message

    @property
    def is_open(self) -> bool:
        return self.resolved is None


class LatestSnapshot(models.Model):
    """The last snapshot of a topology, for when Redis has none (restart, eviction)."""

    topology = models.OneToOneField(
        "topologies.Topology", on_delete=models.CASCADE, primary_key=True, related_name="telemetry_latest"
    )
    ts = models.DateTimeField()
    data = models.JSONField()

    def __str__(self) -> str:
        return f"{self.topology_id}@{self.ts.isoformat()}"


class RollupCursor(models.Model):
    """Up to where raw points have been rolled up into minutes (one row)."""

    name = models.CharField(max_length=32, primary_key=True)
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.until.isoformat()}"
