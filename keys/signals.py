"""A change to a user (role or active state) reaches their keys at once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save
from django.dispatch import receiver

from keys.services import keys_owner_changed


@receiver(post_save, sender=get_user_model())
def _owner_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if not created:
        keys_owner_changed(owner_id=instance.pk)
