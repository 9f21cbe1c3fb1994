"""Parallel workers each get a Redis database of their own (tests/parallel.py)."""

from __future__ import annotations

from tests.parallel import worker_redis_url


def test_each_worker_gets_the_next_database_after_the_base() -> None:
    assert worker_redis_url("redis://127.0.0.1:6379/0", 0) == "redis://127.0.0.1:6379/1"
    assert worker_redis_url("redis://127.0.0.1:6379/5", 2) == "redis://127.0.0.1:6379/8"
    assert worker_redis_url("redis://127.0.0.1:6379", 1) == "redis://127.0.0.1:6379/2"


def test_the_databases_wrap_at_sixteen_and_keep_credentials_and_tls() -> None:
    assert worker_redis_url("rediss://:pw@cache:6380/14", 3) == "rediss://:pw@cache:6380/2"


def test_a_unix_socket_url_is_left_as_it_is() -> None:
    assert worker_redis_url("unix:///run/redis.sock?db=3", 1) == "unix:///run/redis.sock?db=3"
