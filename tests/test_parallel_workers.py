"""Parallel workers each get a Redis database of their own (tests/parallel.py)."""

from __future__ import annotations

from tests.module_weights import weights
from tests.parallel import heaviest_first, module_weights, worker_redis_url
from tests.support import ROOT


def test_each_worker_gets_the_next_database_after_the_base() -> None:
    assert worker_redis_url("redis://127.0.0.1:6379/0", 0) == "redis://127.0.0.1:6379/1"
    assert worker_redis_url("redis://127.0.0.1:6379/5", 2) == "redis://127.0.0.1:6379/8"
    assert worker_redis_url("redis://127.0.0.1:6379", 1) == "redis://127.0.0.1:6379/2"


def test_the_databases_wrap_at_sixteen_and_keep_credentials_and_tls() -> None:
    assert worker_redis_url("rediss://:pw@cache:6380/14", 3) == "rediss://:pw@cache:6380/2"


def test_a_unix_socket_url_is_left_as_it_is() -> None:
    assert worker_redis_url("unix:///run/redis.sock?db=3", 1) == "unix:///run/redis.sock?db=3"


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_the_heaviest_modules_go_first_and_each_keeps_its_tests_in_order() -> None:
    items = [_Item(n) for n in ("a.py::t1", "b.py::t1", "c.py::t1", "b.py::t2", "d.py::t1", "a.py::t2")]
    ordered = heaviest_first(items, {"b.py": 50.0, "d.py": 90.0})  # type: ignore[arg-type]
    want = ["d.py::t1", "b.py::t1", "b.py::t2", "a.py::t1", "a.py::t2", "c.py::t1"]
    assert [i.nodeid for i in ordered] == want


def test_module_weights_are_summed_from_a_durations_report(tmp_path) -> None:
    report = (
        "12.50s call     x/tests/test_a.py::test_one[p]\n"
        "1.50s setup    x/tests/test_a.py::test_one[p]\n"
        "3.00s call     x/tests/test_b.py::test_two\n"
        "(3 durations < 0.005s hidden.)\n"
    )
    assert weights([report]) == {"x/tests/test_a.py": 14.0, "x/tests/test_b.py": 3.0}
    (tmp_path / "w.txt").write_text("# comment\n14.0 x/tests/test_a.py\n3.0 x/tests/test_b.py\n")
    assert module_weights(tmp_path / "w.txt") == {"x/tests/test_a.py": 14.0, "x/tests/test_b.py": 3.0}


def test_every_listed_module_exists() -> None:
    missing = [m for m in module_weights() if not (ROOT / m).exists()]
    assert missing == [], f"tests/module_weights.txt names modules that are gone: {missing}"
