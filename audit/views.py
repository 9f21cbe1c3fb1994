from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from audit.models import AuditEvent


@login_required
def activity(request: HttpRequest) -> HttpResponse:
    events = AuditEvent.objects.select_related("actor")[:200]
    return render(request, "audit/activity.html", {"title": "Activity", "events": events})
