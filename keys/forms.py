"""Forms of the Keys pages: they parse what a person typed; keys.services decides what is allowed."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django import forms
from django.core.validators import MaxValueValidator
from django.utils import timezone

from keys.display import parse_list, parse_percentages
from keys.purposes import Kind, Purpose
from keys.scopes import Scope, scopes_for_role
from keys.validation import LIMIT_FIELDS

LIMIT_LABELS = {
    "requests_per_minute": "Requests per minute",
    "tokens_per_minute": "Tokens per minute",
    "max_concurrent": "Requests at once",
    "requests_per_day": "Requests per day",
    "requests_per_month": "Requests per month",
    "tokens_per_day": "Tokens per day",
    "tokens_per_month": "Tokens per month",
}
# Where a service error about a field is shown when the form names that field differently.
SERVICE_FIELDS = {"expires_at": "expires_in_days", "grace_seconds": "grace"}
GRACE_CHOICES = [
    ("0", "None: the old secret stops at once"),
    ("3600", "1 hour"),
    ("86400", "24 hours (default)"),
    ("259200", "3 days"),
    ("604800", "7 days"),
]


def role_scopes(user: Any) -> list[str]:
    """Scopes the user's role may hand to a key, in the order the Scope list gives them."""
    held = scopes_for_role(user.role, active=user.is_active)
    return [scope for scope in Scope.values if scope in held]


def _form_id(value: str | None) -> str:
    """The id that marks one filled-in form, so sending it twice issues one secret; made up when absent."""
    return value or uuid.uuid4().hex


class KeyCreateForm(forms.Form):
    form_id = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)
    name = forms.CharField(
        max_length=100,
        help_text="Say where it is used, e.g. ci-deploy or claude-code-alice.",
        error_messages={"required": "Give the key a name saying where it is used, e.g. ci-deploy."},
    )
    purpose_label = forms.CharField(
        max_length=64,
        required=False,
        label="Purpose label",
        help_text="Name the purpose, e.g. load-test.",
        error_messages={"required": "Name the purpose, e.g. load-test."},
    )
    kind = forms.ChoiceField(
        choices=Kind.choices,
        help_text="Management keys call Tandem's REST API; inference keys call models through the gateway.",
    )
    scopes = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False)
    team = forms.CharField(max_length=100, required=False, help_text="Optional, e.g. search-backend.")
    expires_in_days = forms.IntegerField(min_value=1, label="Expires in (days)")
    alert_thresholds = forms.CharField(
        required=False,
        label="Budget alerts at (%)",
        help_text="You are told when a quota passes each percentage, e.g. 80, 95. Empty: no alerts.",
    )
    allowed_models = forms.CharField(
        required=False,
        label="Allowed models",
        help_text="Model or topology names, separated by commas. Empty allows every model.",
    )
    allowed_cidrs = forms.CharField(
        required=False,
        label="Allowed source networks",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Addresses or networks, e.g. 10.0.0.0/8 192.0.2.7. Empty accepts any address.",
    )

    def __init__(self, *args: Any, purpose: Purpose, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.purpose = purpose
        allowed = role_scopes(user)
        scopes = self.fields["scopes"]
        assert isinstance(scopes, forms.MultipleChoiceField)
        scopes.choices = [(s, Scope(s).label) for s in allowed]
        scopes.help_text = (
            f"Only the scopes your role ({user.role}) may hold are listed; "
            "an inference key holds only inference."
        )
        self.fields["expires_in_days"].validators.append(
            MaxValueValidator(
                purpose.max_expiry_days,
                f"{purpose.label} keys live at most {purpose.max_expiry_days} days; "
                f"choose {purpose.max_expiry_days} or fewer.",
            )
        )
        self.fields[
            "expires_in_days"
        ].help_text = f"{purpose.label} keys live at most {purpose.max_expiry_days} days."
        self.fields["expires_in_days"].widget.attrs.update(min=1, max=purpose.max_expiry_days)
        if purpose.name != "custom":
            del self.fields["purpose_label"]
        else:
            self.fields["purpose_label"].required = True
        for field in LIMIT_FIELDS:
            self.fields[field] = forms.IntegerField(
                min_value=0,
                required=False,
                label=LIMIT_LABELS[field],
                widget=forms.NumberInput(attrs={"placeholder": "no limit", "min": 0}),
            )
        self.initial.setdefault("form_id", uuid.uuid4().hex)
        self.initial.setdefault("kind", purpose.kind)
        self.initial.setdefault("scopes", [s for s in purpose.scopes if s in allowed])
        self.initial.setdefault("expires_in_days", purpose.expiry_days)
        self.initial.setdefault("alert_thresholds", ", ".join(str(t) for t in purpose.alert_thresholds))
        for field in LIMIT_FIELDS:
            self.initial.setdefault(field, getattr(purpose, field))

    def error_labels(self) -> str:
        """The fields to fix, by label, in the order the form shows them: “Name”, “Expires in (days)”."""
        wrong = [f"“{self[name].label}”" for name in self.fields if name in self.errors]
        return ", ".join(wrong)

    def limit_fields(self) -> list[forms.BoundField]:
        return [self[field] for field in LIMIT_FIELDS]

    def clean_form_id(self) -> str:
        return _form_id(self.cleaned_data.get("form_id"))

    def clean_alert_thresholds(self) -> list[int]:
        found = parse_percentages(self.cleaned_data.get("alert_thresholds") or "")
        if found is None:
            raise forms.ValidationError("Give whole percentages separated by commas, e.g. 80, 95.")
        return found

    def clean_allowed_models(self) -> list[str]:
        return parse_list(self.cleaned_data.get("allowed_models") or "")

    def clean_allowed_cidrs(self) -> list[str]:
        return parse_list(self.cleaned_data.get("allowed_cidrs") or "")

    def service_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "purpose": self.purpose.name,
            "purpose_label": data.get("purpose_label", ""),
            "kind": data["kind"],
            "scopes": list(data["scopes"]),
            "team": data["team"],
            "allowed_models": data["allowed_models"],
            "allowed_cidrs": data["allowed_cidrs"],
            "alert_thresholds": data["alert_thresholds"],
            "expires_at": timezone.now() + timedelta(days=data["expires_in_days"]),
            "limits_given": {field: data[field] for field in LIMIT_FIELDS},
        }


class KeyRotateForm(forms.Form):
    form_id = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)
    grace = forms.TypedChoiceField(
        choices=GRACE_CHOICES,
        coerce=int,
        initial="86400",
        label="Old secret keeps working for",
        help_text="Time to roll the new secret out to every client before the old one stops.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial.setdefault("form_id", uuid.uuid4().hex)

    def clean_form_id(self) -> str:
        return _form_id(self.cleaned_data.get("form_id"))


class KeyRevokeForm(forms.Form):
    reason = forms.CharField(
        max_length=200,
        required=False,
        help_text="Optional; shown in the key's audit trail, e.g. leaked in a log.",
    )
    confirm = forms.BooleanField(
        label="I understand: every client using this key is refused at once, and this cannot be undone.",
        error_messages={"required": "Tick the box to confirm; revocation cannot be undone."},
    )


def apply_domain_error(form: forms.Form, fields: dict[str, list[str]], message: str) -> None:
    """Show each problem of a service error next to its field; what has no field goes on top."""
    placed = False
    for field, problems in fields.items():
        name = SERVICE_FIELDS.get(field, field)
        if name in form.fields:
            for problem in problems:
                form.add_error(name, problem)
            placed = True
    if not placed:
        form.add_error(None, message)
