"""The topology page's panel of slow and failed requests, and one trace as a waterfall."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.permissions import role_required
from accounts.roles import Role
from traces import selectors
from traces.models import Trace


def panel_context(topology: Any) -> dict[str, Any]:
    return {
        "topology": topology,
        "problems": list(selectors.recent_problems(topology_id=topology.pk)),
        "tracing": selectors.tracing_mode(topology.spec),
    }


@require_GET
@role_required(Role.VIEWER)
def trace_detail(request: HttpRequest, trace_id: str) -> HttpResponse:
    trace = Trace.objects.select_related("topology__cluster").filter(trace_id=trace_id.lower()).first()
    if trace is None:
        raise Http404("No kept trace with this id (traces are kept 72 h by default, and only some are kept).")
    return render(
        request,
        "traces/detail.html",
        {"trace": trace, "waterfall": selectors.trace_waterfall(trace=trace)},
    )
