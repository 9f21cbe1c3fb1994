"""Encrypted model fields: Fernet tokens under a MultiFernet built from ``settings.FIELD_ENCRYPTION_KEYS``.

The first key encrypts; every key decrypts. To rotate: prepend a new key to FIELD_ENCRYPTION_KEYS, deploy,
run ``manage.py rotate_encryption`` (re-encrypts every encrypted column with the newest key), then drop the
old key. The database column holds only the token, never the plaintext.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

PREFIX = "fernet:"


@lru_cache(maxsize=4)
def _multifernet(keys: tuple[str, ...]) -> MultiFernet:
    if not keys:
        raise ImproperlyConfigured("FIELD_ENCRYPTION_KEYS is empty; set at least one Fernet key")
    return MultiFernet([Fernet(k.encode()) for k in keys])


def fernet() -> MultiFernet:
    return _multifernet(tuple(settings.FIELD_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    return PREFIX + fernet().encrypt(plaintext.encode("utf-8")).decode("ascii")


def decrypt(stored: str) -> str:
    """Plaintext of a stored token; raises ImproperlyConfigured when no configured key opens it."""
    token = stored[len(PREFIX) :] if stored.startswith(PREFIX) else stored
    try:
        return fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise ImproperlyConfigured(
            "an encrypted value cannot be decrypted with any key in FIELD_ENCRYPTION_KEYS; "
            "the key it was written with has been removed — put it back (after the newest key)"
        ) from None


def rotate(stored: str) -> str:
    """Re-encrypt a stored token with the newest key."""
    token = stored[len(PREFIX) :] if stored.startswith(PREFIX) else stored
    return PREFIX + fernet().rotate(token.encode("ascii")).decode("ascii")


class EncryptedTextField(models.TextField):
    """A text field stored encrypted. Empty strings and None are stored as they are (nothing to hide).

    Not usable in lookups other than ``isnull``/exact-empty: each encryption of the same text differs.
    """

    description = "Text encrypted at rest (Fernet)"

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return decrypt(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.startswith(PREFIX):
            return decrypt(value)
        return value

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return encrypt(str(value))


def encrypted_fields() -> Iterator[tuple[type[models.Model], list[str]]]:
    """Every concrete model with encrypted fields, and those fields' column names."""
    for model in apps.get_models():
        names = [f.attname for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
        if names:
            yield model, names
