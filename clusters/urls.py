from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from clusters import views

app_name = "clusters"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.clusters_list, name="list"),
]
