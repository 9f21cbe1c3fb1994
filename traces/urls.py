from __future__ import annotations

from django.urls import URLPattern, path

from traces import views

app_name = "traces"
urlpatterns: list[URLPattern] = [
    path("<str:trace_id>/", views.trace_detail, name="detail"),
]
