"""The Keys pages. Each write calls one service; a new secret is rendered once, in the POST's answer."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from gateway.series import CHART_WINDOWS
from keys import selectors, services
from keys.display import KeyRow, fitted_hours, hour_starts, hourly_series, key_row
from keys.filtersets import ApiKeyFilterSet
from keys.forms import KeyCreateForm, KeyRevokeForm, KeyRotateForm, apply_domain_error
from keys.models import ApiKey
from keys.purposes import PURPOSES, purpose_for
from keys.snippets import client_snippets
from keys.validation import LIMIT_FIELDS

PAGE_SIZE = 200
CHART_HOURS = 168
# The usage chart starts at the first use in the week, but spans at least this many hours.
CHART_MIN_HOURS = 6
# Session entry remembering which create/rotate forms were already used (form id -> key id, never a
# secret), so re-sending the same POST on reload does not issue another secret.
USED_FORMS = "keys.used_forms"
USED_FORMS_KEPT = 50


def _rows(keys: list[ApiKey]) -> list[KeyRow]:
    now = timezone.now()
    hourly = selectors.key_usage_by_key(key_ids=[k.pk for k in keys], hours=24)
    rows = []
    for key in keys:
        live = selectors.key_live_state(key=key, now=now)
        rows.append(
            key_row(
                key=key,
                status=live.status,
                usage=live.usage,
                exhausted=live.exhausted,
                limits={field: getattr(key, field) for field in LIMIT_FIELDS},
                expires_at=key.expires_at,
                hourly=hourly[str(key.pk)],
                now=now,
            )
        )
    return rows


def _groups(rows: list[KeyRow]) -> list[tuple[str, str, list[KeyRow]]]:
    """Rows by purpose (custom labels each their own group), in the order of the purpose list."""
    groups: dict[str, tuple[str, str, list[KeyRow]]] = {}
    for row in rows:
        key: Any = row.key
        label = key.purpose_display
        groups.setdefault(label, (label, purpose_for(key.purpose).description, []))[2].append(row)
    return list(groups.values())


def _purpose_order(key: ApiKey) -> tuple[int, str, str]:
    return (list(PURPOSES).index(key.purpose), key.purpose_label.lower(), key.name.lower())


@login_required
def keys_list(request: HttpRequest) -> HttpResponse:
    visible = selectors.keys_visible_to(user=request.user)
    filterset = ApiKeyFilterSet(request.GET or None, queryset=visible)
    keys = filterset.qs if filterset.is_bound and filterset.is_valid() else visible
    page = Paginator(sorted(keys, key=_purpose_order), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "keys/list.html",
        {
            "title": "Keys",
            "filter": filterset,
            "page": page,
            "groups": _groups(_rows(list(page.object_list))),
            "query": query.urlencode(),
            "filtered": any(value for name, value in request.GET.items() if name != "page"),
            "sees_all": selectors.user_manages_all_keys(request.user),
            "purposes": PURPOSES,
            "policy": selectors.key_policy(),
            "may_issue_inference": selectors.may_issue_own_inference_keys(user=request.user),
        },
    )


@require_POST
@role_required(Role.ADMIN)
def key_policy(request: HttpRequest) -> HttpResponse:
    allowed = request.POST.get("viewers_issue_inference_keys") == "on"
    services.key_policy_set(
        actor=request.user, viewers_issue_inference_keys=allowed, source_ip=client_ip(request)
    )
    messages.success(
        request,
        "Viewers may issue their own inference keys again."
        if allowed
        else "Viewers may no longer issue inference keys for themselves; keys already issued keep working, "
        "and admins can still issue one for a viewer.",
    )
    return redirect("keys:list")


def _visible_key(request: HttpRequest, pk: Any) -> ApiKey:
    return get_object_or_404(selectors.keys_visible_to(user=request.user), pk=pk)


@login_required
def key_detail(request: HttpRequest, pk: Any) -> HttpResponse:
    key = _visible_key(request, pk)
    row = _rows([key])[0]
    history = selectors.key_usage_history(key=key, hours=CHART_HOURS)
    now = timezone.now()
    fitted = fitted_hours(
        history[0].hour if history else None, end=now, window=CHART_HOURS, minimum=CHART_MIN_HOURS
    )
    hours = CHART_HOURS if request.GET.get("usage") == "week" else fitted
    return render(
        request,
        "keys/detail.html",
        {
            "title": f"Key {key.name}",
            "row": row,
            "key": key,
            "purpose": purpose_for(key.purpose),
            "secrets": list(key.secrets.all()),
            "now": now,
            "events": selectors.key_audit_trail(key=key),
            "used_recently": bool(history),
            "chart_hours": hours,
            "chart_fitted": hours < CHART_HOURS,
            "chart_fits": fitted < CHART_HOURS,
            "usage_chart": {
                "hours": hour_starts(end=now, hours=hours),
                **{
                    name: hourly_series([(u.hour, getattr(u, name)) for u in history], end=now, hours=hours)
                    for name in ("requests", "tokens", "denied")
                },
            },
            "limits": [(field.replace("_", " "), getattr(key, field)) for field in LIMIT_FIELDS],
            "series_url": reverse("api:key-gateway-series", kwargs={"pk": key.pk}),
            "chart_windows": CHART_WINDOWS,
            "charts_title": "Requests with this key through the gateway",
        },
    )


@login_required
def key_new(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "keys/new.html",
        {
            "title": "New key",
            "purposes": PURPOSES.values(),
            "may_issue_inference": selectors.may_issue_own_inference_keys(user=request.user),
        },
    )


def _used_form(request: HttpRequest, form_id: str) -> str | None:
    return dict(request.session.get(USED_FORMS, [])).get(form_id)


def _remember_form(request: HttpRequest, form_id: str, key: ApiKey) -> None:
    used = [entry for entry in request.session.get(USED_FORMS, []) if entry[0] != form_id]
    request.session[USED_FORMS] = [*used, [form_id, str(key.pk)]][-USED_FORMS_KEPT:]


def _already_issued(request: HttpRequest, key_id: str) -> HttpResponse:
    messages.warning(
        request,
        "This form was already sent and its secret shown; a secret is never shown twice. "
        "If you did not copy it, rotate the key to get a new one.",
    )
    return redirect("keys:detail", pk=key_id)


def _render_issued(
    request: HttpRequest, issued: services.Issued, *, rotated: bool, grace: int = 0
) -> HttpResponse:
    key = issued.key
    root = request.build_absolute_uri("/").rstrip("/")
    inference = key.kind == "inference"
    model = selectors.model_for_key(key=key)
    response = render(
        request,
        "keys/issued.html",
        {
            "title": f"New secret for {key.name}" if rotated else f"Key {key.name} created",
            "key": key,
            "secret": issued.secret,
            "rotated": rotated,
            "grace": grace,
            "retiring": key.secrets.exclude(retires_at__isnull=True).order_by("-retires_at").first(),
            "base_url": f"{root}/v1" if inference else f"{root}/api/v1",
            "model": model if inference else "",
            "snippets": client_snippets(
                base_url=root,
                secret=issued.secret,
                kind=key.kind,
                model=model,
                purpose=key.purpose,
                aliases=selectors.aliases_for_model(model=model),
            ),
        },
    )
    response["Cache-Control"] = "no-store"
    return response


@login_required
def key_create(request: HttpRequest, purpose: str) -> HttpResponse:
    template = PURPOSES.get(purpose)
    if template is None:
        raise Http404("No such purpose")
    form = KeyCreateForm(request.POST or None, purpose=template, user=request.user)
    if request.method == "POST" and form.is_valid():
        form_id = form.cleaned_data["form_id"]
        done = _used_form(request, form_id)
        if done is not None:
            return _already_issued(request, done)
        try:
            issued = services.key_create(
                actor=request.user, source_ip=client_ip(request), **form.service_arguments()
            )
        except DomainError as error:
            apply_domain_error(form, error.fields, error.message)
        else:
            _remember_form(request, form_id, issued.key)
            return _render_issued(request, issued, rotated=False)
    return render(
        request,
        "keys/create.html",
        {"title": f"New key: {template.label}", "purpose": template, "form": form},
        status=400 if form.is_bound else 200,
    )


@login_required
def key_rotate(request: HttpRequest, pk: Any) -> HttpResponse:
    key = _visible_key(request, pk)
    form = KeyRotateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        form_id = form.cleaned_data["form_id"]
        done = _used_form(request, form_id)
        if done is not None:
            return _already_issued(request, done)
        try:
            issued = services.key_rotate(
                key=key,
                actor=request.user,
                grace_seconds=form.cleaned_data["grace"],
                source_ip=client_ip(request),
            )
        except DomainError as error:
            apply_domain_error(form, error.fields, error.message)
        else:
            _remember_form(request, form_id, issued.key)
            return _render_issued(request, issued, rotated=True, grace=form.cleaned_data["grace"])
    return render(
        request,
        "keys/rotate.html",
        {"title": f"Rotate {key.name}", "key": key, "form": form},
        status=400 if form.is_bound else 200,
    )


@login_required
def key_revoke(request: HttpRequest, pk: Any) -> HttpResponse:
    key = _visible_key(request, pk)
    form = KeyRevokeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.key_revoke(
                key=key, actor=request.user, reason=form.cleaned_data["reason"], source_ip=client_ip(request)
            )
        except DomainError as error:
            apply_domain_error(form, error.fields, error.message)
        else:
            messages.success(
                request, f"Key {key.name} revoked: every request with it is refused from now on."
            )
            return redirect("keys:detail", pk=key.pk)
    return render(
        request,
        "keys/revoke.html",
        {"title": f"Revoke {key.name}", "key": key, "form": form},
        status=400 if form.is_bound else 200,
    )
