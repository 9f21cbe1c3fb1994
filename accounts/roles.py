"""The three roles and what each may do. Higher roles include the lower ones."""

from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer (read only)"
    OPERATOR = "operator", "Operator (deploy, rebalance)"
    ADMIN = "admin", "Admin (clusters, keys, users)"


RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.ADMIN: 2}


def role_allows(held: str, needed: str) -> bool:
    return RANK.get(Role(held), -1) >= RANK[Role(needed)]
