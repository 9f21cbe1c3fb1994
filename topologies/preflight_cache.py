"""Preflight's cluster facts, remembered briefly, and read within a bound for pages and the deploy API.

Reading the facts (nodes, CRDs, access reviews, live objects) is several Kubernetes calls; a black-holed
API server makes each wait out its timeouts (``KUBE_CONNECT_TIMEOUT_SECONDS`` + read timeout, retried
within ``KUBE_CALL_DEADLINE_SECONDS``). The deployments panel needs preflight's verdict on every topology
page view, so (docs/deploy-preflight.md):

- facts are cached for ``PREFLIGHT_CACHE_SECONDS`` (30 s) in the Django cache (Redis) under a key made of
  the topology, the SHA-256 of the spec checked, the deployed revision, the topology's latest deployment
  (id and state), and the cluster (id, server, credential version). A spec change, a deploy (queued,
  progressing or finished) or new cluster credentials give a new key, so nothing stale is read;
- every live preflight (the "Run preflight" button, the API's preflight, the editor, a deploy job's own
  preflight) stores what it read, so an explicit re-run refreshes what the page shows;
- a read that misses the cache runs in a background thread; the caller waits at most
  ``PREFLIGHT_PAGE_TIMEOUT_SECONDS`` (3 s) and otherwise gets "the cluster did not answer within 3 s" as
  an unreachable-cluster fact, while the thread goes on and stores the real facts for the next view.

Only the facts are cached; the checks themselves (pure) and the model-name claims (database) run every time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import connections

from topologies.preflight_facts import ClusterFacts
from topologies.spec import TopologySpec

if TYPE_CHECKING:
    from clusters.models import Cluster
    from topologies.models import Topology

logger = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 30.0
DEFAULT_PAGE_TIMEOUT_SECONDS = 3.0

T = TypeVar("T")

_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cluster-read")
_pending: dict[str, Future[Any]] = {}
_pending_lock = threading.Lock()


def ttl_seconds() -> float:
    return float(getattr(settings, "PREFLIGHT_CACHE_SECONDS", DEFAULT_TTL_SECONDS))


def page_timeout_seconds() -> float:
    return float(getattr(settings, "PREFLIGHT_PAGE_TIMEOUT_SECONDS", DEFAULT_PAGE_TIMEOUT_SECONDS))


def spec_digest(spec: TopologySpec) -> str:
    return hashlib.sha256(json.dumps(spec.to_dict(), sort_keys=True, default=str).encode()).hexdigest()


def facts_key(*, cluster: Cluster, spec: TopologySpec, topology: Topology | None) -> str:
    """Changes with the spec, the cluster's address or credentials, and any deploy of the topology."""
    parts: list[Any] = [cluster.pk, cluster.server, cluster.credential_version, spec_digest(spec)]
    if topology is not None and topology.pk:
        latest = topology.deployments.order_by("-pk").values_list("pk", "state").first()
        parts += [topology.pk, topology.deployed_revision_id, *(latest or ("", ""))]
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]
    return f"preflight-facts:{digest}"


def _get(key: str) -> ClusterFacts | None:
    try:
        found = cache.get(key)
    except Exception as error:  # Redis down: fail open, read the cluster
        logger.info("preflight cache unavailable: %s", error)
        return None
    return found if isinstance(found, ClusterFacts) else None


def _put(key: str, facts: ClusterFacts) -> None:
    try:
        cache.set(key, facts, timeout=ttl_seconds())
    except Exception as error:
        logger.info("preflight cache unavailable: %s", error)


def remember(key: str, facts: ClusterFacts) -> None:
    """Store facts just read live (an explicit preflight refreshes what pages show)."""
    _put(key, facts)


def run_bounded(key: str, call: Callable[[], T], timeout: float) -> tuple[bool, T | None]:
    """Run ``call`` in a background thread, at most one per ``key`` in this process at a time, and wait at
    most ``timeout`` seconds: (True, its value), or (False, None) while it goes on. Its exceptions are
    raised here when it finished in time."""

    def run() -> Any:
        try:
            return call()
        finally:
            connections.close_all()  # this thread's own connections, if the call opened any
            with _pending_lock:
                _pending.pop(key, None)

    with _pending_lock:
        future = _pending.get(key)
        if future is None:
            future = _pool.submit(run)
            _pending[key] = future
    try:
        return True, future.result(timeout=timeout)
    except FutureTimeout:
        return False, None


def bounded_facts(
    *,
    cluster: Cluster,
    spec: TopologySpec,
    topology: Topology | None,
    read: Callable[[], ClusterFacts],
    timeout: float | None = None,
) -> ClusterFacts:
    """Cached facts, or ``read()`` within ``timeout`` seconds; past it, an unreachable-cluster fact."""
    key = facts_key(cluster=cluster, spec=spec, topology=topology)
    cached = _get(key)
    if cached is not None:
        return cached
    bound = page_timeout_seconds() if timeout is None else timeout

    def read_and_store() -> ClusterFacts:
        facts = read()
        _put(key, facts)
        return facts

    done, facts = run_bounded(key, read_and_store, bound)
    if done and facts is not None:
        return facts
    return ClusterFacts(
        reachable=False,
        error=(
            f"cluster {cluster.name} did not answer within {bound:g} s "
            "(preflight goes on in the background: reload in a moment)"
        ),
    )
