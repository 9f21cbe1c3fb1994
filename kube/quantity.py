"""Kubernetes resource quantities in the canonical form the API server stores them in.

A Deployment sent with ``cpu: "1.5"`` or ``memory: "0.5Gi"`` comes back as ``1500m`` and
``512Mi``: the API server re-serialises every ``resource.Quantity`` (apimachinery's
``Quantity.CanonicalizeBytes``). Comparing what Tandem rendered with what the cluster returns must
therefore compare canonical forms, or every such field reads as drift. Pure; no client import.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_NANO = Decimal("1e-9")


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse(value: object) -> tuple[Decimal, str]:
    """The quantity's exact value and its format: ``binary``, ``decimal`` or ``exponent``."""
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match or isinstance(value, bool):
        raise QuantityError(f"{text!r} is not a quantity (e.g. 500m, 1.5, 64Gi)")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    try:
        if suffix in _BINARY:
            return number * (Decimal(2) ** _BINARY[suffix]), "binary"
        if suffix in _DECIMAL:
            return number.scaleb(_DECIMAL[suffix]), "decimal"
        return number.scaleb(int(suffix[1:])), "exponent"
    except InvalidOperation:
        raise QuantityError(f"{text!r} is out of range") from None


def _decimal_form(value: Decimal, *, exponent_form: bool) -> str:
    # Values are rounded up to nano units, then written with the largest exponent (a multiple of 3)
    # that keeps the mantissa whole.
    nanos = int((value / _NANO).to_integral_value(rounding=ROUND_CEILING))
    if nanos == 0:
        return "0"
    exponent = -9
    while nanos % 1000 == 0 and exponent < 18:
        nanos //= 1000
        exponent += 3
    if exponent_form:
        return f"{nanos}" if exponent == 0 else f"{nanos}e{exponent}"
    return f"{nanos}{_DECIMAL_SUFFIX[exponent]}"


def canonical(value: object) -> str:
    """The form the API server returns: ``1.5`` → ``1500m``, ``0.5Gi`` → ``512Mi``, ``1000m`` → ``1``."""
    number, form = parse(value)
    if form == "binary":
        if -1024 < number < 1024 or number != number.to_integral_value():
            return _decimal_form(number, exponent_form=False)
        whole, shift = int(number), 0
        while whole % 1024 == 0 and shift < 60:
            whole //= 1024
            shift += 10
        suffix = {bits: name for name, bits in _BINARY.items()}.get(shift, "")
        return f"{whole}{suffix}"
    return _decimal_form(number, exponent_form=form == "exponent")


def same(a: object, b: object) -> bool:
    """True when both are quantities of the same value."""
    try:
        return parse(a)[0] == parse(b)[0]
    except QuantityError:
        return False
