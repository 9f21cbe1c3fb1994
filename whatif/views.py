"""Pages: the what-if page (start, live progress, cancel, result, apply a split with its diff, past runs)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.permissions import role_required, user_has_role
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from topologies import selectors as topology_selectors
from whatif import selectors, services, simulation, tracereplay
from whatif.models import WhatIfState
from workload.tracefile import MAX_TRACE_BYTES

WINDOWS = [(300, "last 5 minutes"), (900, "last 15 minutes"), (3600, "last hour"), (10800, "last 3 hours")]


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _page(pk: int, run: int | None = None, anchor: str = "") -> HttpResponseRedirect:
    url = reverse("whatif:page", args=[pk]) + (f"?run={run}" if run else "")
    return HttpResponseRedirect(url + anchor)


def _refused(request: HttpRequest, what: str, error: DomainError) -> None:
    detail = "; ".join(" ".join(str(m) for m in msgs) for msgs in (error.fields or {}).values())
    messages.error(
        request,
        f"{what}: {error.message}" + (f" ({detail})" if detail and detail not in error.message else "") + ".",
    )


@require_GET
@role_required(Role.VIEWER)
def page(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    runs = list(selectors.whatif_run_list(topology=topology)[:20])
    chosen = _int(request.GET.get("run"))
    run = next((r for r in runs if r.pk == chosen), None) if chosen else (runs[0] if runs else None)
    if chosen and run is None:
        run = get_object_or_404(selectors.whatif_run_list(topology=topology), pk=chosen)
    preview: dict[str, Any] | None = None
    preview_error = ""
    apply = request.GET.get("apply", "")
    if run is not None and apply:
        prefill, _, decode = apply.partition("x")
        try:
            preview = services.apply_preview(run=run, prefill=_int(prefill) or 0, decode=_int(decode) or 0)
        except DomainError as error:
            preview_error = error.message
    try:
        allowed = services.allowed_splits(topology)
    except DomainError:
        allowed = []
    window = _int(request.GET.get("window_seconds")) or 900
    return render(
        request,
        "whatif/page.html",
        {
            "title": f"What-if: {topology.name}",
            "topology": topology,
            "runs": runs,
            "run": run,
            "allowed": allowed,
            "windows": WINDOWS,
            "window": window,
            "preview": preview,
            "preview_error": preview_error,
            "can_write": user_has_role(request.user, Role.OPERATOR),
            "succeeded": WhatIfState.SUCCEEDED,
            "active": next((r for r in runs if r.active), None),
            "source_label": simulation.SOURCES.get((run.result or {}).get("traffic_source", ""))
            if run
            else None,
        },
    )


def _trace(upload: UploadedFile) -> dict[str, Any]:
    """An uploaded trace file, read as the API reads its ``trace`` field."""
    if (upload.size or 0) > MAX_TRACE_BYTES:
        raise DomainError(
            f"the trace file is over {MAX_TRACE_BYTES // 1048576} MiB", fields={"trace": ["cut the file"]}
        )
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise DomainError(
            f"the trace file is not UTF-8 text (byte {error.start})", fields={"trace": ["save it as UTF-8"]}
        ) from None
    return tracereplay.read(text, name=(upload.name or "")[:200])


@require_POST
@role_required(Role.OPERATOR)
def start(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    splits = []
    for value in request.POST.getlist("split"):
        prefill, _, decode = value.partition("x")
        splits.append((_int(prefill) or 0, _int(decode) or 0))
    window = _int(request.POST.get("window_seconds"))
    upload = request.FILES.get("trace")
    try:
        trace = _trace(upload) if upload is not None else None
        if window is None:
            raise DomainError(
                "window: give a whole number of seconds",
                code="invalid",
                fields={"window_seconds": ["give 60 to 86400 seconds"]},
            )
        run = services.whatif_run_create(
            topology=topology,
            user=request.user,
            window_seconds=window,
            splits=splits or None,
            trace=trace,
            source_ip=client_ip(request),
        )
    except DomainError as error:
        _refused(request, "What-if not started", error)
        return _page(pk)
    messages.success(request, f"What-if #{run.pk} queued: progress below.")
    return _page(pk, run.pk)


@require_POST
@role_required(Role.OPERATOR)
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(selectors.whatif_run_all(), pk=pk)
    try:
        run = services.whatif_run_cancel(run=run, actor=request.user, source_ip=client_ip(request))
        messages.success(request, f"What-if #{run.pk}: {run.step}.")
    except DomainError as error:
        _refused(request, "Not cancelled", error)
    return _page(run.topology_id, run.pk)


@require_POST
@role_required(Role.OPERATOR)
def apply(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(selectors.whatif_run_all(), pk=pk)
    prefill, decode = _int(request.POST.get("prefill")) or 0, _int(request.POST.get("decode")) or 0
    try:
        outcome = services.whatif_run_apply(
            run=run, prefill=prefill, decode=decode, actor=request.user, source_ip=client_ip(request)
        )
    except DomainError as error:
        _refused(request, "Split not applied", error)
        return _page(run.topology_id, run.pk)
    topology_url = reverse("topologies:detail", args=[run.topology_id])
    if outcome["rebalance"]:
        messages.success(
            request,
            f"Rebalance #{outcome['rebalance']} to {prefill}P/{decode}D started: its steps are in the "
            f"topology's Rebalancing panel ({topology_url}#rebalancing).",
        )
    else:
        messages.success(
            request, f"Revision {outcome['revision']} saved with {prefill}P/{decode}D; deploy it to use it."
        )
    return _page(run.topology_id, run.pk)
