"""The simulator's staged moves: a staged instance leaves routing but still counts in its role, drains, and
is the one a following in-place switch takes (at once: it is already drained); unstaging routes it again."""

from __future__ import annotations

from perfmodel.sim import SimRequest, run_trace
from perfmodel.sim.cluster import ClusterView, Stage


def _trace() -> list[SimRequest]:
    return [SimRequest(0.2 * i, 600, 40) for i in range(150)]


def test_a_staged_instance_leaves_routing_and_the_switch_that_follows_takes_it():
    views: list[ClusterView] = []

    def controller(view: ClusterView):
        views.append(view)
        if view.ts < 6:
            return Stage(1, 3)
        if view.ts < 11:
            return None
        if view.ts < 16:
            return (1, 3)
        return None

    cluster = run_trace(_trace(), 2, 2, controller=controller, tick=5.0, budget=4, in_place=True)
    staged = next(v for v in views if 9 < v.ts < 11)
    assert (staged.prefill, staged.ready_prefill) == (2, 1)  # counted in its role, out of routing
    assert cluster.switches == 1 and cluster.failed_by_rebalancing == 0
    assert all(o.ok for o in cluster.outcomes)
    # Drained while staged: the switch took only its link and role-switch time.
    assert cluster.switch_seconds[0] < 2.0, cluster.switch_seconds
    assert cluster.timeline[-1][1:3] == (1, 3)


def test_unstaging_routes_the_instance_again():
    views: list[ClusterView] = []

    def controller(view: ClusterView):
        views.append(view)
        if view.ts < 6:
            return Stage(1, 3)
        if view.ts < 11:
            return Stage(0, 0, unstage=True)
        return None

    cluster = run_trace(_trace(), 2, 2, controller=controller, tick=5.0, budget=4, in_place=True)
    later = next(v for v in views if 14 < v.ts < 16)
    assert (later.prefill, later.ready_prefill) == (2, 2)
    assert cluster.switches == 0 and all(o.ok for o in cluster.outcomes)
