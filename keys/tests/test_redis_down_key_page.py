"""With Redis unreachable, a limited key reads "unknown: Redis unreachable" (it may be used up, and
nothing can tell), never "active"."""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from keys import limits
from tests.support import closed_port

pytestmark = pytest.mark.django_db


def redis_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = redis.Redis(host="127.0.0.1", port=closed_port(), socket_connect_timeout=0.2, socket_timeout=0.2)
    monkeypatch.setattr(limits, "_client", dead)
    limits._local.__dict__.clear()


def test_an_exhausted_key_is_unknown_not_active_while_redis_is_down(operator, issue, monkeypatch):
    limited = issue(operator, name="quota-app", limits_given={"requests_per_day": 1})
    redis_unreachable(monkeypatch)
    client = Client()
    client.force_login(operator)

    page = client.get(f"/keys/{limited.key.pk}/").content.decode()
    assert "unknown: Redis unreachable" in page
    assert "Redis is unreachable, so this key&#x27;s usage cannot be read" in page
    assert ">active<" not in page

    assert "unknown: Redis unreachable" in client.get("/keys/").content.decode()
