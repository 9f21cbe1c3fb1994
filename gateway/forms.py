from __future__ import annotations

from typing import Any

from django import forms


class RouteForm(forms.Form):
    endpoint_url = forms.CharField(required=False, max_length=300, label="Serving endpoint")
    aliases = forms.CharField(required=False, max_length=2000, help_text="Comma-separated model names.")
    fallback_base_url = forms.CharField(
        required=False, max_length=300, label="Fallback base URL (ends in /v1)"
    )
    fallback_api_key = forms.CharField(
        required=False, max_length=4096, widget=forms.PasswordInput(render_value=False)
    )
    clear_fallback_key = forms.BooleanField(required=False)
    fallback_model = forms.CharField(required=False, max_length=256)
    fallback_on_429 = forms.BooleanField(required=False)

    def clean_aliases(self) -> list[str]:
        raw: Any = self.cleaned_data.get("aliases") or ""
        return [part.strip() for part in str(raw).split(",") if part.strip()]
