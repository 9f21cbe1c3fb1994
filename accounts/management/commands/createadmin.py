"""Create the first admin: `manage.py createadmin --username admin [--password-from-env VAR]`."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import createadmin_ensure
from controlplane.api.errors import DomainError


class Command(BaseCommand):
    help = (
        "Create an admin user. Without a password one is generated and printed. An existing user is "
        "left unchanged unless --reset-password is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password-from-env",
            metavar="VAR",
            help="read the password from this environment variable (never from the command line)",
        )
        parser.add_argument(
            "--reset-password", action="store_true", help="set a new password if the user exists"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        password = None
        variable = options["password_from_env"]
        if variable:
            password = os.environ.get(variable, "")
            if not password:
                raise CommandError(
                    f"{variable} is empty or not set; export the password in it, or omit the flag"
                )
        try:
            user, outcome, generated = createadmin_ensure(
                username=options["username"],
                password=password,
                reset_password=options["reset_password"],
                email=options["email"],
            )
        except DomainError as error:
            problems = " ".join(p for ps in error.fields.values() for p in ps)
            raise CommandError(f"{error.message} {problems}".strip()) from None
        self.stdout.write(f"admin {user.username}: {outcome}")
        if generated:
            self.stdout.write(f"password: {generated}")
