"""Dependency probes for /readyz, each bounded by a short timeout."""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import connection
from django.db.utils import DatabaseError


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        connection.close()
        return str(error).strip().splitlines()[0] if str(error).strip() else error.__class__.__name__
    return "ok"


def check_redis() -> str:
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
        client.ping()
        client.close()
    except redis.RedisError as error:
        return str(error) or error.__class__.__name__
    return "ok"


def check_all() -> dict[str, str]:
    return {"database": check_database(), "redis": check_redis()}
