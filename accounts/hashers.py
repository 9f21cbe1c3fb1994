"""PBKDF2 with a configurable work factor.

Production keeps Django's default (1,000,000 iterations, ~1 s per hash on a small core). The test
suite sets PASSWORD_HASH_ITERATIONS low (the Makefile does) because it creates hundreds of users;
hashes stay PBKDF2-SHA256, so any process with any setting verifies them.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher


class TandemPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    @property
    def iterations(self) -> int:  # type: ignore[override]
        configured = getattr(settings, "PASSWORD_HASH_ITERATIONS", None)
        return int(configured) if configured else PBKDF2PasswordHasher.iterations
