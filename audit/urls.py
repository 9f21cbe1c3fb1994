from __future__ import annotations

from django.urls import path

from audit import views

app_name = "audit"
urlpatterns = [path("", views.activity, name="activity")]
