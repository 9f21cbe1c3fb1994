from __future__ import annotations

from django.urls import URLPattern, path

from rebalancing import views

app_name = "rebalancing"
urlpatterns: list[URLPattern] = [
    path("topology/<int:pk>/planner/", views.planner_set, name="planner"),
    path("topology/<int:pk>/planner/handoff/", views.planner_handoff, name="planner_handoff"),
    path("topology/<int:pk>/ratio/", views.ratio_set, name="ratio"),
    path("topology/<int:pk>/switch-role/", views.switch_role, name="switch_role"),
    path("topology/<int:pk>/panel/", views.panel, name="panel"),
]
