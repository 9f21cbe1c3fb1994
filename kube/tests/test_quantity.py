"""Quantities in the API server's canonical form (values as a real kube-apiserver returns them)."""

from __future__ import annotations

import pytest

from kube.quantity import QuantityError, canonical, same


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("1.5", "1500m"),
        (1.5, "1500m"),
        ("0.5", "500m"),
        ("1000m", "1"),
        ("100m", "100m"),
        ("2000", "2k"),
        ("8", "8"),
        (8, "8"),
        ("0.5Gi", "512Mi"),
        ("1.5Gi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("64Gi", "64Gi"),
        ("0.5Ki", "512"),
        ("1e3", "1e3"),
        ("1.5e3", "1500"),
        ("0", "0"),
        ("0.0001", "100u"),
    ],
)
def test_canonical_form_is_what_the_api_server_stores(sent, stored):
    assert canonical(sent) == stored


def test_same_compares_values_and_refuses_non_quantities():
    assert same("1.5", "1500m") and same("1Gi", "1024Mi") and not same("1", "2")
    assert not same("abc", "abc1")
    with pytest.raises(QuantityError):
        canonical("1.5 cores")
