"""A topology's model name or deployment changing changes the gateway's routes."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from gateway.services import bump_routes


@receiver(post_save, sender="topologies.Topology")
@receiver(post_delete, sender="topologies.Topology")
@receiver(post_save, sender="gateway.Route")
def _routes_changed(sender: Any, **kwargs: Any) -> None:
    transaction.on_commit(bump_routes)
