"""Create a key non-interactively (bootstrapping automation); prints only the secret on stdout.

    python manage.py create_api_key --user admin --purpose automation --kind management \
        --scopes deploy,topologies:read --expires-in 30d
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from controlplane.api.errors import DomainError
from keys import services
from keys.purposes import PURPOSES

_DURATION = re.compile(r"(\d+)([hdw])")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise CommandError(f"--expires-in {text!r}: use a number and a unit, e.g. 12h, 30d or 2w")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


class Command(BaseCommand):
    help = "Create an API key and print its secret (only the secret) on stdout."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="owner's user name")
        parser.add_argument("--purpose", required=True, choices=sorted(PURPOSES))
        parser.add_argument("--name", help="default: <purpose>-<date>")
        parser.add_argument("--label", default="", help="label of a custom purpose")
        parser.add_argument("--kind", choices=["management", "inference"])
        parser.add_argument("--scopes", help="comma-separated, e.g. deploy,topologies:read")
        parser.add_argument("--expires-in", help="e.g. 30d (default: the purpose's)")
        parser.add_argument("--team", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = get_user_model().objects.filter(username=options["user"]).first()
        if owner is None:
            raise CommandError(f"--user {options['user']!r}: no such user")
        expires_at = timezone.now() + parse_duration(options["expires_in"]) if options["expires_in"] else None
        scopes = [s.strip() for s in options["scopes"].split(",") if s.strip()] if options["scopes"] else None
        try:
            issued = services.key_create(
                actor=owner,
                owner=owner,
                name=options["name"] or f"{options['purpose']}-{timezone.now():%Y%m%d-%H%M}",
                purpose=options["purpose"],
                purpose_label=options["label"],
                kind=options["kind"],
                scopes=scopes,
                team=options["team"],
                expires_at=expires_at,
            )
        except DomainError as error:
            raise CommandError(error.message) from None
        self.stdout.write(issued.secret)
