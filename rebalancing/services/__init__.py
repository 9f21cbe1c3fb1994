"""Writes of the rebalancing app (``rebalances``: ratio changes and role switches; ``planner``: its settings
and tick)."""

from rebalancing.services.planner import clean_params, planner_config_set, planner_tick, planner_tick_all
from rebalancing.services.rebalances import rebalance_advance, rebalance_ratio_start, rebalance_switch_start

__all__ = [
    "clean_params",
    "planner_config_set",
    "planner_tick",
    "planner_tick_all",
    "rebalance_advance",
    "rebalance_ratio_start",
    "rebalance_switch_start",
]
