"""Pure checks of single spec values: whole numbers, Kubernetes quantities, image references, free text.

Each check returns None when the value is good, or the message (what is wrong; the fix) for the
field. Digits are ASCII only: ``str.isdigit()`` is true for "²" and "١", which ``int()`` refuses or
silently reads as 1, so nothing here uses it.
"""

from __future__ import annotations

import re
import unicodedata

from controlplane.api.fields import ascii_int

__all__ = ["ascii_int", "hidden_characters", "image_problem", "quantity_problem", "text_problem"]

# Kubernetes resource.Quantity, as the API server parses it (k8s.io/apimachinery/pkg/api/resource):
#   <quantity> ::= <signedNumber><suffix>; <number> ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
#   <suffix> ::= Ki|Mi|Gi|Ti|Pi|Ei | m|""|k|M|G|T|P|E | (e|E)<signedNumber>
QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[KMGTPE]i|[eE][+-]?[0-9]+|[mkMGTPE])?$"
)
QUANTITY_MAX = 64

# Container image references (github.com/distribution/reference): [domain[:port]/]path[:tag][@digest].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
# The first component is a registry host only with a dot, a port or as localhost (else it is a path).
_DOMAIN = (
    rf"(?:localhost(?::[0-9]+)?|{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})+(?::[0-9]+)?"
    rf"|{_DOMAIN_COMPONENT}:[0-9]+|\[[0-9a-fA-F:.]+\](?::[0-9]+)?)"
)
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"^(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?$")
IMAGE_MAX = 1024  # the whole reference
IMAGE_NAME_MAX = 255  # the repository name, as the registry grammar caps it

MODEL_NAME_MAX = 256
MODEL_SOURCE_MAX = 1024
TEXT_MAX = 8192  # any other single string (an env value, one extra argument)


def hidden_characters(text: str) -> list[str]:
    """Control and format characters (NUL, line breaks, bidi overrides, zero-width) as U+XXXX."""
    return sorted({f"U+{ord(ch):04X}" for ch in text if unicodedata.category(ch) in ("Cc", "Cf", "Cs")})


def quantity_problem(value: str, *, what: str, example: str) -> str | None:
    """A Kubernetes quantity (cpu "500m", memory "64Gi") that the API server accepts, not negative."""
    if len(value) > QUANTITY_MAX:
        return f"is longer than {QUANTITY_MAX} characters; write the {what} as a quantity such as {example}"
    match = QUANTITY.match(value)
    if match is None:
        return (
            f"{value!r} is not a Kubernetes quantity; write the {what} as digits with an optional "
            f"suffix (m, k, M, G, Ki, Mi, Gi, ...), e.g. {example}"
        )
    if match.group("sign") == "-" and match.group("number").strip("0.") != "":
        return f"must not be negative; e.g. {example}"
    return None


def image_problem(value: str) -> str | None:
    """An image reference a registry can resolve, at most IMAGE_MAX characters."""
    example = "quay.io/ascend/vllm-ascend:v0.10.1"
    if len(value) > IMAGE_MAX:
        return f"is {len(value)} characters; an image reference has at most {IMAGE_MAX}, e.g. {example}"
    match = IMAGE_REFERENCE.match(value)
    if match is None:
        return (
            "is not an image reference ([registry/]repository[:tag][@sha256:digest], lower-case "
            f"repository), e.g. {example}"
        )
    if len(match.group("name")) > IMAGE_NAME_MAX:
        return f"has a repository name over {IMAGE_NAME_MAX} characters; shorten it, e.g. {example}"
    return None


def text_problem(value: str, *, limit: int, example: str) -> str | None:
    """Free text (a model name, a source): within ``limit`` characters, no hidden characters."""
    if len(value) > limit:
        return f"is {len(value)} characters; use at most {limit}, e.g. {example}"
    hidden = hidden_characters(value)
    if hidden:
        return f"contains control or invisible characters ({', '.join(hidden[:5])}); remove them"
    return None
