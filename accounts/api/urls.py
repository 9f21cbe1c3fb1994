from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from accounts.api.views import MeView, UserViewSet

router = DefaultRouter(trailing_slash=True)
router.register("users", UserViewSet, basename="user")
urlpatterns = [path("me/", MeView.as_view(), name="me"), *router.urls]
