from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from telemetry.api import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("topologies/<int:pk>/metrics/", views.TopologyMetricsView.as_view(), name="topology-metrics"),
    path(
        "topologies/<int:pk>/metrics/latest/",
        views.TopologyLatestMetricsView.as_view(),
        name="topology-metrics-latest",
    ),
    path("topologies/<int:pk>/alerts/", views.TopologyAlertList.as_view(), name="topology-alerts"),
]
