"""Writes of the rebalancing app (``rebalances``: ratio changes and role switches; ``inplace``: carrying out
an in-place switch; ``steps``: every rebalance's row, step log and end; ``planner``: its settings and
tick)."""

from rebalancing.services.inplace import instance_role_assign, rebalance_in_place_run
from rebalancing.services.owners import planner_handoff
from rebalancing.services.planner import clean_params, planner_config_set, planner_tick, planner_tick_all
from rebalancing.services.rebalances import rebalance_advance, rebalance_ratio_start, rebalance_switch_start

__all__ = [
    "clean_params",
    "instance_role_assign",
    "planner_config_set",
    "planner_handoff",
    "planner_tick",
    "planner_tick_all",
    "rebalance_advance",
    "rebalance_in_place_run",
    "rebalance_ratio_start",
    "rebalance_switch_start",
]
