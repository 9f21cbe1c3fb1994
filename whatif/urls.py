from __future__ import annotations

from django.urls import URLPattern, path

from whatif import views

app_name = "whatif"
urlpatterns: list[URLPattern] = [
    path("topology/<int:pk>/", views.page, name="page"),
    path("topology/<int:pk>/start/", views.start, name="start"),
    path("run/<int:pk>/cancel/", views.cancel, name="cancel"),
    path("run/<int:pk>/apply/", views.apply, name="apply"),
]
