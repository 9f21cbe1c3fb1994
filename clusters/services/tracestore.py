"""Where the engines' spans are read from when Tandem's own store has none: the cluster's Jaeger or
Tempo (``traces.store``), like the Prometheus metrics source. The token is stored encrypted and never
shown again."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from django.db import transaction

from audit.services import audit_record
from clusters.credentials import invalid
from clusters.models import Cluster, TraceStore


def _validated(trace_store: str, url: str) -> tuple[str, str]:
    chosen = (trace_store or "").strip().lower()
    if chosen not in TraceStore.values:
        raise invalid(
            "trace_store",
            f"trace_store {trace_store!r} is not one of {', '.join(TraceStore.values)}; pick one",
        )
    url = (url or "").strip().rstrip("/")
    if url:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise invalid(
                "trace_store_url",
                f"trace_store_url {url!r} is not an http(s) URL; give the query base URL, "
                "e.g. http://tempo.observability:3200 or http://jaeger-query.observability:16686",
            )
    if chosen != TraceStore.EMBEDDED and not url:
        raise invalid("trace_store_url", f"the {chosen} query base URL is required with trace_store {chosen}")
    return chosen, url


@transaction.atomic
def cluster_set_trace_store(
    *,
    cluster: Cluster,
    trace_store: str | None = None,
    trace_store_url: str | None = None,
    trace_store_token: str | None = None,
    actor: Any = None,
    source_ip: str | None = None,
) -> Cluster:
    """Choose the trace store the waterfall reads engine spans from; what is left out (None) is kept."""
    locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
    chosen, url = _validated(
        locked.trace_store if trace_store is None else trace_store,
        locked.trace_store_url if trace_store_url is None else trace_store_url,
    )
    before = locked.trace_store
    locked.trace_store, locked.trace_store_url = chosen, url
    if trace_store_token is not None:
        locked.trace_store_token = trace_store_token.strip()
    locked.save(update_fields=["trace_store", "trace_store_url", "trace_store_token", "updated"])
    audit_record(
        action="cluster.trace_store",
        actor=actor,
        target=locked,
        source_ip=source_ip,
        detail={"from": before, "to": chosen, "trace_store_url": url},
    )
    return locked
