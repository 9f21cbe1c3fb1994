"""API key tokens: format, checksum and hashing (pure functions, no database).

A token is ``tdm_<kind letter>_`` + 30 base62 characters from :mod:`secrets` + a 6-character base62
CRC32 checksum of everything before it, the scheme GitHub uses for its tokens: secret scanners can
find leaked keys by their shape, and a mistyped or truncated token is refused before any lookup.
Only an HMAC-SHA256 of the token under a server-side pepper is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import zlib
from dataclasses import dataclass

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
RANDOM_LENGTH = 30
CHECKSUM_LENGTH = 6
KIND_LETTERS = {"management": "m", "inference": "i"}
LETTER_KINDS = {letter: kind for kind, letter in KIND_LETTERS.items()}
PREFIX = "tdm_"
TOKEN_LENGTH = len(PREFIX) + 2 + RANDOM_LENGTH + CHECKSUM_LENGTH
TOKEN_RE = re.compile(r"tdm_([mi])_([0-9A-Za-z]{30})([0-9A-Za-z]{6})")
DISPLAY_PREFIX_LENGTH = len(PREFIX) + 2 + 4  # "tdm_m_AbCd"


def base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, rest = divmod(number, 62)
        digits.append(BASE62[rest])
    return "".join(reversed(digits)).rjust(width, "0")


def checksum(body: str) -> str:
    return base62(zlib.crc32(body.encode("ascii")), CHECKSUM_LENGTH)


def generate(kind: str) -> str:
    body = f"{PREFIX}{KIND_LETTERS[kind]}_" + "".join(secrets.choice(BASE62) for _ in range(RANDOM_LENGTH))
    return body + checksum(body)


@dataclass(frozen=True)
class Parsed:
    token: str
    kind: str

    @property
    def display_prefix(self) -> str:
        return self.token[:DISPLAY_PREFIX_LENGTH]

    @property
    def last4(self) -> str:
        return self.token[-4:]


class TokenFormatError(ValueError):
    """The string is not a Tandem token; ``hint`` says what the caller most likely got wrong."""

    def __init__(self, code: str, hint: str) -> None:
        super().__init__(hint)
        self.code = code
        self.hint = hint


def parse(raw: str) -> Parsed:
    """Check shape and checksum. Never looks anything up, so it is safe before any database query."""
    if raw != raw.strip():
        raise TokenFormatError(
            "token_whitespace",
            "The token has leading or trailing whitespace or a newline; send it exactly as shown, "
            "e.g. `Authorization: Bearer tdm_...` with nothing after the token.",
        )
    if raw.lower().startswith("bearer"):
        raise TokenFormatError(
            "bearer_doubled", "The word `Bearer` appears twice; send `Authorization: Bearer <token>`."
        )
    match = TOKEN_RE.fullmatch(raw)
    if match is None:
        if raw.startswith(PREFIX) and len(raw) != TOKEN_LENGTH:
            hint = (
                f"The token has {len(raw)} characters; Tandem tokens have {TOKEN_LENGTH}. "
                "It was probably cut off when copied."
            )
        else:
            hint = "This is not a Tandem API key; they look like `tdm_m_...` (management) or `tdm_i_...`."
        raise TokenFormatError("token_malformed", hint)
    body = raw[:-CHECKSUM_LENGTH]
    if not hmac.compare_digest(checksum(body), match.group(3)):
        raise TokenFormatError(
            "token_checksum",
            "The token's checksum does not match: it was mistyped or altered. Copy it again.",
        )
    return Parsed(token=raw, kind=LETTER_KINDS[match.group(1)])


def digest(token: str, pepper: bytes) -> str:
    """The stored form of a token: HMAC-SHA256 under the server's pepper, hex."""
    return hmac.new(pepper, token.encode("ascii"), hashlib.sha256).hexdigest()
