from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from keys import views

app_name = "keys"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.keys_list, name="list"),
]
