from __future__ import annotations

from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    path("users/", views.user_list_page, name="users"),
    path("users/<int:pk>/", views.user_edit_page, name="user-edit"),
]
