"""The simulator's product failure semantics (``fail_moves``): a switch whose drain outlasts the drain
timeout fails the move; the instance serves its old role again and nothing is retried."""

from __future__ import annotations

from perfmodel.sim import SimRequest, run_trace
from perfmodel.sim.cluster import ClusterView


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
