"""A virtual-clock simulator built on the sandbox's own engine performance model.

``VirtualClockLoop`` is an asyncio loop whose clock jumps to the next scheduled event instead of
waiting for it; ``SimCluster`` runs the sandbox's ``SimEngine`` objects (the same scheduler, prefix
cache, continuous batching and KV-link pull code) and the router's own pod-choice policy on it, with
restart-based role changes that cost a model load. An hour of traffic runs in seconds to minutes.
"""

from sandbox.sim.cluster import ClusterView, SimCluster, SimRequest, run_trace
from sandbox.sim.loop import VirtualClockLoop, run_virtual

__all__ = ["ClusterView", "SimCluster", "SimRequest", "VirtualClockLoop", "run_trace", "run_virtual"]
