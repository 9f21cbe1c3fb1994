from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from clusters.models import AuthMethod, Cluster
from controlplane import crypto

SECRET = "eyJhbGciOiJSUzI1NiJ9.super-secret-token"


def _raw(cluster_id: int, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM clusters_cluster WHERE id = %s", [cluster_id])  # noqa: S608
        return cursor.fetchone()[0]


def _make() -> Cluster:
    return Cluster.objects.create(
        name="enc",
        auth_method=AuthMethod.TOKEN,
        server="https://k:6443",
        token=SECRET,
        ca_bundle="-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n",
    )


@pytest.mark.django_db
def test_raw_column_never_contains_the_plaintext():
    cluster = _make()
    raw = _raw(cluster.pk, "token")
    assert SECRET not in raw
    assert raw.startswith("fernet:")
    assert Cluster.objects.get(pk=cluster.pk).token == SECRET


@pytest.mark.django_db
def test_value_written_with_an_old_key_reads_after_a_new_key_is_prepended(settings):
    cluster = _make()
    old = list(settings.FIELD_ENCRYPTION_KEYS)
    settings.FIELD_ENCRYPTION_KEYS = [Fernet.generate_key().decode(), *old]
    assert Cluster.objects.get(pk=cluster.pk).token == SECRET


@pytest.mark.django_db
def test_rotate_encryption_rewrites_every_value_with_the_newest_key(settings):
    cluster = _make()
    old = list(settings.FIELD_ENCRYPTION_KEYS)
    newest = Fernet.generate_key().decode()
    settings.FIELD_ENCRYPTION_KEYS = [newest, *old]
    before = _raw(cluster.pk, "token")
    out = io.StringIO()
    call_command("rotate_encryption", stdout=out)
    after = _raw(cluster.pk, "token")
    assert after != before
    assert "re-encrypted 1 rows" in out.getvalue()
    # Only the newest key is needed from now on.
    settings.FIELD_ENCRYPTION_KEYS = [newest]
    assert Cluster.objects.get(pk=cluster.pk).token == SECRET


@pytest.mark.django_db
def test_a_value_no_key_opens_fails_loudly(settings):
    cluster = _make()
    settings.FIELD_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(Exception, match="cannot be decrypted"):
        Cluster.objects.get(pk=cluster.pk)


def test_empty_values_stay_empty():
    assert crypto.decrypt(crypto.encrypt("")) == ""
