"""The deploy-policy form of the deployments panel: the API's checks, in words that name the fix."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from controlplane.api.fields import AsciiIntegerFormField

RANGE_FIX = "use 10 to 86400 seconds, or leave empty for the default"
ROLLBACK_CHOICES = [("", "default"), ("on", "on"), ("off", "off")]


class DeployPolicyForm(forms.Form):
    ready_timeout_seconds = AsciiIntegerFormField(
        required=False,
        min_value=10,
        max_value=86400,
        label="Ready timeout",
        error_messages={
            "invalid": f"enter a whole number of seconds; {RANGE_FIX}",
            "min_value": RANGE_FIX,
            "max_value": RANGE_FIX,
        },
    )
    auto_rollback = forms.ChoiceField(
        required=False,
        choices=ROLLBACK_CHOICES,
        label="Auto-rollback",
        error_messages={
            "invalid_choice": "choose on, off, or default (the environment's DEPLOY_AUTO_ROLLBACK)"
        },
    )

    keep_failed_first_deploy = forms.ChoiceField(
        required=False,
        choices=[("", "unchanged"), ("remove", "remove"), ("keep", "keep")],
        label="Failed first deploy",
        error_messages={"invalid_choice": "choose remove (the default) or keep (to inspect it)"},
    )

    def clean_keep_failed_first_deploy(self) -> bool | None:
        value = self.cleaned_data.get("keep_failed_first_deploy") or ""
        return {"keep": True, "remove": False}.get(value)

    def clean_auto_rollback(self) -> bool | None:
        value = self.cleaned_data.get("auto_rollback") or ""
        return {"on": True, "off": False}.get(value)


def field_errors_text(errors: Mapping[str, Iterable[Any]]) -> str:
    """ "ready timeout: use 10 to 86400 seconds, ..." for every field with an error."""
    return "; ".join(
        f"{name.replace('_seconds', '').replace('_', ' ')}: {' '.join(str(m) for m in msgs)}"
        for name, msgs in errors.items()
    )
