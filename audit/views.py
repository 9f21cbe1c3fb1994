from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from audit.filtersets import AuditEventFilterSet
from audit.selectors import audit_action_names, audit_event_list

PAGE_SIZE = 50


@login_required
def activity(request: HttpRequest) -> HttpResponse:
    filterset = AuditEventFilterSet(request.GET or None, queryset=audit_event_list())
    events = filterset.qs if filterset.is_bound and filterset.is_valid() else audit_event_list()
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    filtered = any(value for key, value in request.GET.items() if key != "page")
    return render(
        request,
        "audit/activity.html",
        {
            "title": "Activity",
            "filter": filterset,
            "page": page,
            "query": query.urlencode(),
            "filtered": filtered,
            "actions": audit_action_names(),
        },
    )
