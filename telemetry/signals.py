"""Signals telemetry sends, so other apps (the SLOs) can read each interval without telemetry knowing them.

``interval_collected``: sent after a collection of a deployed topology was stored, with
``topology_id`` (int), ``ts`` (unix seconds) and ``requests`` (``telemetry.derive.RequestWindow``: the
interval's latency histogram increments and request outcomes). Receivers run in the collecting worker;
one that raises is logged and never stops the collection.
"""

from __future__ import annotations

from django.dispatch import Signal

interval_collected = Signal()
