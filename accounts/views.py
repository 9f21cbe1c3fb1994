"""Login/logout and the admins' Users pages. Each write calls one service."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.core.paginator import Paginator
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from accounts import services
from accounts.filtersets import UserFilterSet
from accounts.forms import LoginForm, PasswordSetForm, UserCreateForm, UserEditForm
from accounts.models import User
from accounts.permissions import role_required
from accounts.roles import Role
from accounts.selectors import user_list
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    form_class = LoginForm
    redirect_authenticated_user = True
    extra_context = {"title": "Log in"}


class LogoutView(auth_views.LogoutView):
    pass


def _apply_domain_error(form: Form, error: DomainError) -> None:
    placed = False
    for field, problems in error.fields.items():
        if field in form.fields:
            for problem in problems:
                form.add_error(field, problem)
            placed = True
    if not placed:
        form.add_error(None, error.message)


@role_required(Role.ADMIN)
def user_list_page(request: HttpRequest) -> HttpResponse:
    filterset = UserFilterSet(request.GET or None, queryset=user_list())
    page = Paginator(filterset.qs, 50).get_page(request.GET.get("page"))
    form = UserCreateForm()
    if request.method == "POST":
        form = UserCreateForm(request.POST)
        if form.is_valid():
            try:
                user = services.user_create(
                    actor=request.user, source_ip=client_ip(request), **form.cleaned_data
                )
            except DomainError as error:
                _apply_domain_error(form, error)
            else:
                messages.success(request, f"User {user.username} created as {user.role}.")
                return redirect("accounts:users")
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "accounts/users.html",
        {"title": "Users", "filter": filterset, "page": page, "form": form, "query": query.urlencode()},
    )


@role_required(Role.ADMIN)
def user_edit_page(request: HttpRequest, pk: int) -> HttpResponse:
    user = get_object_or_404(User, pk=pk)
    edit_form = UserEditForm(initial={"email": user.email, "role": user.role, "is_active": user.is_active})
    password_form = PasswordSetForm()
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "password":
                password_form = PasswordSetForm(request.POST)
                if password_form.is_valid():
                    services.user_set_password(
                        actor=request.user,
                        user=user,
                        password=password_form.cleaned_data["password"],
                        source_ip=client_ip(request),
                    )
                    messages.success(request, f"Password of {user.username} changed.")
                    return redirect("accounts:user-edit", pk=user.pk)
            elif action == "delete" and not request.POST.get("confirm"):
                messages.error(request, "Tick the confirmation box to delete the user.")
            elif action == "delete":
                services.user_delete(actor=request.user, user=user, source_ip=client_ip(request))
                messages.success(request, f"User {user.username} deleted.")
                return redirect("accounts:users")
            else:
                edit_form = UserEditForm(request.POST)
                if edit_form.is_valid():
                    services.user_update(
                        actor=request.user, user=user, source_ip=client_ip(request), **edit_form.cleaned_data
                    )
                    messages.success(request, f"User {user.username} saved.")
                    return redirect("accounts:user-edit", pk=user.pk)
        except DomainError as error:
            if action == "password":
                _apply_domain_error(password_form, error)
            elif action == "delete":
                hints = " ".join(problem for problems in error.fields.values() for problem in problems)
                messages.error(request, f"{error.message} {hints}")
            else:
                _apply_domain_error(edit_form, error)
    return render(
        request,
        "accounts/user_edit.html",
        {
            "title": f"User {user.username}",
            "subject": user,
            "edit_form": edit_form,
            "password_form": password_form,
        },
    )
