from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from accounts import lockout
from accounts.roles import Role
from accounts.selectors import login_lockout_remaining
from controlplane.client_ip import client_ip


class LoginForm(AuthenticationForm):
    """The standard login form, plus a clear message while the lockout holds."""

    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()
        except ValidationError:
            username = self.cleaned_data.get("username") or ""
            remaining = login_lockout_remaining(username=username, source_ip=client_ip(self.request))
            if remaining:
                raise ValidationError(lockout.lockout_message(remaining), code="locked_out") from None
            raise


class UserCreateForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)
    password = forms.CharField(
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 10 characters; not a common password.",
    )


class UserEditForm(forms.Form):
    email = forms.EmailField(required=False)
    role = forms.ChoiceField(choices=Role.choices)
    is_active = forms.BooleanField(
        required=False, label="Active", help_text="Inactive users cannot log in; their history stays."
    )


class PasswordSetForm(forms.Form):
    password = forms.CharField(
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 10 characters; not a common password.",
    )
