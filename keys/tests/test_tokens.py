from __future__ import annotations

import re
import zlib

import pytest

from keys import tokens


def test_it_has_the_prefix_random_part_and_checksum():
    token = tokens.generate("management")
    assert re.fullmatch(r"tdm_m_[0-9A-Za-z]{36}", token)
    assert tokens.generate("inference").startswith("tdm_i_")
    assert len(token) == tokens.TOKEN_LENGTH == 42
    body = token[:-6]
    assert token[-6:] == tokens.base62(zlib.crc32(body.encode()), 6)


def test_each_token_is_new():
    assert len({tokens.generate("management") for _ in range(200)}) == 200


def test_parse_accepts_a_good_token_and_knows_its_kind():
    token = tokens.generate("inference")
    parsed = tokens.parse(token)
    assert parsed.kind == "inference"
    assert parsed.display_prefix == token[:10]
    assert parsed.last4 == token[-4:]


@pytest.mark.parametrize(
    ("mangle", "code"),
    [
        (lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"), "token_checksum"),
        (lambda t: t[:10] + ("x" if t[10] != "x" else "y") + t[11:], "token_checksum"),
        (lambda t: t[:-3], "token_malformed"),
        (lambda t: t + "\n", "token_whitespace"),
        (lambda t: " " + t, "token_whitespace"),
        (lambda t: "Bearer " + t, "bearer_doubled"),
        (lambda t: "sk-" + t[6:], "token_malformed"),
        (lambda t: t.replace("tdm_m_", "tdm_x_"), "token_malformed"),
    ],
)
def test_parse_refuses_mistakes_with_a_hint(mangle, code):
    with pytest.raises(tokens.TokenFormatError) as caught:
        tokens.parse(mangle(tokens.generate("management")))
    assert caught.value.code == code
    assert caught.value.hint


def test_truncated_token_hint_says_it_was_cut():
    token = tokens.generate("management")
    with pytest.raises(tokens.TokenFormatError, match="cut off"):
        tokens.parse(token[:30])


def test_digest_depends_on_the_pepper_and_is_not_the_token():
    token = tokens.generate("management")
    a = tokens.digest(token, b"p" * 32)
    assert a == tokens.digest(token, b"p" * 32)
    assert a != tokens.digest(token, b"q" * 32)
    assert token not in a and len(a) == 64
