"""A virtual-clock simulator built on the product's engine performance model (``perfmodel.model``).

``VirtualClockLoop`` is an asyncio loop whose clock jumps to the next scheduled event instead of
waiting for it; ``SimCluster`` runs ``ModelEngine`` objects (the scheduler, prefix
cache, continuous batching and KV-link pull code) and the router's own pod-choice policy on it, with
restart-based role changes that cost a model load. An hour of traffic runs in seconds to minutes.
"""

from perfmodel.sim.cluster import ClusterView, SimCluster, SimRequest, run_trace
from perfmodel.sim.loop import VirtualClockLoop, run_virtual

__all__ = ["ClusterView", "SimCluster", "SimRequest", "VirtualClockLoop", "run_trace", "run_virtual"]
