from __future__ import annotations

from django.urls import URLPattern, path

from rebalancing.api import views

urlpatterns: list[URLPattern] = [
    path("topologies/<int:pk>/switch-role/", views.TopologySwitchRole.as_view(), name="topology-switch-role"),
    path("topologies/<int:pk>/ratio/", views.TopologyRatio.as_view(), name="topology-ratio"),
    path("topologies/<int:pk>/planner/", views.TopologyPlanner.as_view(), name="topology-planner"),
    path(
        "topologies/<int:pk>/planner/handoff/",
        views.TopologyPlannerHandoff.as_view(),
        name="topology-planner-handoff",
    ),
    path("topologies/<int:pk>/decisions/", views.TopologyDecisions.as_view(), name="topology-decisions"),
    path("topologies/<int:pk>/rebalances/", views.TopologyRebalances.as_view(), name="topology-rebalances"),
]
