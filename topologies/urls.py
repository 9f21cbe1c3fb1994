from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from topologies import views

app_name = "topologies"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.topologies_list, name="list"),
]
