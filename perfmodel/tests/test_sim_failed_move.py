"""The simulator's product failure semantics (``fail_moves``, by default the executor's
``rebalancing.inplace.FAILED_SWITCH_FAILS_MOVE``): a switch whose drain outlasts the drain timeout (by default
the executor's ``DRAIN_TIMEOUT_SECONDS``, 30 s) fails the move; the instance serves its old role again and
nothing is retried. The product's executor does the same (rebalancing/tests/test_in_place_sandbox.py: a 1 s
drain timeout on a busy instance fails the switch and the instance serves its old role again)."""

from __future__ import annotations

from django.conf import settings

from perfmodel.sim import SimRequest, run_trace
from perfmodel.sim.cluster import ClusterView
from rebalancing.inplace import DRAIN_TIMEOUT_SECONDS, FAILED_SWITCH_FAILS_MOVE


def test_a_drain_timeout_fails_the_move_and_the_instance_serves_its_old_role():
    trace = [SimRequest(0.1 * i, 600, 400) for i in range(40)]  # long decodes still running at the move
    views: list[ClusterView] = []

    def controller(view: ClusterView):
        views.append(view)
        return (3, 1) if view.ts < 6 else None  # one decode → prefill, asked once

    cluster = run_trace(
        trace,
        2,
        2,
        controller=controller,
        tick=5.0,
        budget=4,
        in_place=True,
        drain_timeout=1.0,
        fail_moves=True,
    )
    assert cluster.failed_moves == 1 and cluster.switches == 0
    assert cluster.role_changes == 0
    assert [why for *_, why in cluster.timeline] == ["start", "failed"]
    assert cluster.timeline[-1][1:3] == (2, 2)
    assert all(o.ok for o in cluster.outcomes) and cluster.failed_by_rebalancing == 0
    assert (views[-1].prefill, views[-1].decode, views[-1].ready_decode) == (2, 2, 2)


def _switch_one_decode(output_len: int):
    """2P/2D with requests whose decodes take ~``output_len`` × 13 ms; at the first tick (5 s) a
    controller asks for 3P/1D, in place, with the simulator's own drain timeout and failure semantics."""
    trace = [SimRequest(0.05 * i, 200, output_len) for i in range(16)]
    trace.append(SimRequest(60.0, 200, 10))  # the run lasts until the move has ended either way

    def controller(view: ClusterView):
        return (3, 1) if view.ts < 6 else None

    return run_trace(trace, 2, 2, controller=controller, tick=5.0, budget=4, in_place=True)


def test_a_drain_longer_than_the_products_timeout_fails_the_move_as_the_executor_does():
    assert DRAIN_TIMEOUT_SECONDS == settings.REBALANCE_DRAIN_TIMEOUT_SECONDS == 30.0
    assert FAILED_SWITCH_FAILS_MOVE is True
    cluster = _switch_one_decode(4000)  # ~52 s of decoding on each decode instance: longer than 30 s
    assert (cluster.failed_moves, cluster.switches, cluster.role_changes) == (1, 0, 0)
    (failed,) = [ts for ts, *_, why in cluster.timeline if why == "failed"]
    assert 5.0 + DRAIN_TIMEOUT_SECONDS <= failed < 5.0 + DRAIN_TIMEOUT_SECONDS + 1.0  # gave up at 30 s
    assert cluster.timeline[-1][1:3] == (2, 2)  # nothing retried it: the split stayed 2P/2D
    assert all(o.ok for o in cluster.outcomes) and cluster.failed_by_rebalancing == 0


def test_a_drain_within_the_products_timeout_switches():
    cluster = _switch_one_decode(1000)  # ~13 s of decoding: drains within 30 s
    assert (cluster.failed_moves, cluster.switches, cluster.role_changes) == (0, 1, 1)
    assert cluster.timeline[-1][1:4] == (3, 1, "controller")
    assert max(cluster.switch_seconds) < DRAIN_TIMEOUT_SECONDS
