from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from workload.api import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("topologies/<int:pk>/hit-rate/", views.TopologyHitRateView.as_view(), name="topology-hit-rate"),
    path("topologies/<int:pk>/request-trace/", views.TopologyTraceView.as_view(), name="topology-trace"),
    path("workload/traces/import/", views.TraceImportView.as_view(), name="trace-import"),
    path("workload/traces/convert/", views.TraceConvertView.as_view(), name="trace-convert"),
]
