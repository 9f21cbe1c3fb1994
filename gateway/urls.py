from __future__ import annotations

from django.urls import URLPattern, path

from gateway import views

app_name = "gateway"
urlpatterns: list[URLPattern] = [
    path("topology/<int:pk>/verify/", views.topology_verify, name="verify"),
    path("topology/<int:pk>/settings/", views.topology_route, name="route"),
    path("topology/<int:pk>/panel/", views.topology_panel, name="panel"),
]
