"""How long a simulated answer is: where the model would say end-of-sequence, and what caps it.

A model ends its answer with its end-of-sequence (EOS) token; answer lengths are roughly log-normal (most
a few hundred tokens, a long tail). The simulated engine draws that length from a hash of the prompt and
the request's ``seed``, so the same request always gets the same length, in every process. vLLM's own
request extensions decide whether EOS is honoured: ``ignore_eos: true`` generates to the cap (what vLLM's
benchmark tool sends for fixed-length load), ``min_tokens`` forbids EOS before that many tokens.

The EOS token is an output token (vLLM counts it in ``completion_tokens``), so an answer that ends at EOS
has ``natural`` tokens; one cut by the cap has exactly the cap and finishes with ``length``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist

MEDIAN_TOKENS = 240
SPREAD = 0.8  # sigma of the log: the middle half of answers is 140-410 tokens
_NORMAL = NormalDist()


def natural_length(prompt: str, seed: int | None = None) -> int:
    """Tokens the model generates up to and including its EOS for this prompt (log-normal, at least 1)."""
    digest = hashlib.blake2b(f"{seed}\x1f{prompt}".encode(), digest_size=8).digest()
    quantile = (int.from_bytes(digest, "big") + 0.5) / 2**64
    return max(1, round(MEDIAN_TOKENS * math.exp(SPREAD * _NORMAL.inv_cdf(quantile))))


@dataclass(frozen=True)
class Length:
    tokens: int
    at_eos: bool  # True: finish reason ``stop``; False: the cap was reached (``length``)


def output_length(*, natural: int, cap: int, ignore_eos: bool = False, min_tokens: int = 0) -> Length:
    """The answer's length under the cap (``max_tokens`` or what the context leaves)."""
    if ignore_eos:
        return Length(cap, at_eos=False)
    wanted = max(natural, min_tokens + 1) if min_tokens > 0 else natural
    if wanted <= cap:
        return Length(wanted, at_eos=True)
    return Length(cap, at_eos=False)
