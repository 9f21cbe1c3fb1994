from __future__ import annotations

from django.urls import URLPattern, path

from whatif.api import views

urlpatterns: list[URLPattern] = [
    path(
        "topologies/<int:pk>/what-if-runs/", views.TopologyWhatIfRuns.as_view(), name="topology-what-if-runs"
    ),
    path("what-if-runs/<int:pk>/", views.WhatIfRunDetail.as_view(), name="what-if-run"),
    path("what-if-runs/<int:pk>/cancel/", views.WhatIfRunCancel.as_view(), name="what-if-run-cancel"),
    path("what-if-runs/<int:pk>/apply/", views.WhatIfRunApply.as_view(), name="what-if-run-apply"),
]
