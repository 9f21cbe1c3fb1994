"""`/ws/notifications/`: the logged-in user's own notifications (budget alerts of their keys)."""

from __future__ import annotations

from controlplane import broadcast
from controlplane.consumers import TandemConsumer


class NotificationConsumer(TandemConsumer):
    """Joins only the group of the user the session belongs to; nothing in the URL names a user."""

    async def may_join(self) -> bool:
        user = self.scope["user"]
        return bool(user.is_active)

    def group_names(self) -> list[str]:
        return [broadcast.user_group(self.scope["user"].pk)]
