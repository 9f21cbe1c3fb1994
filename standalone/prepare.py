"""One Django start-up for everything before the servers run: migrate, collectstatic (when the
static sources changed), and the admin account. Run by the standalone runner as a child process."""

from __future__ import annotations

import argparse
import os
import sys
import time
from io import StringIO


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m standalone.prepare")
    parser.add_argument("--admin-user", required=True)
    parser.add_argument("--collectstatic", action="store_true")
    parser.add_argument("--reset-password", action="store_true")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    from controlplane.env import ConfigError

    try:
        import django

        django.setup()
    except ConfigError as error:
        print(f"tandem: configuration error: {error}", file=sys.stderr)
        return 2
    from django.core.management import CommandError, call_command

    try:
        begin = time.monotonic()
        call_command("migrate", interactive=False, verbosity=0)
        print(f"database migrated ({time.monotonic() - begin:.1f} s)", flush=True)
        if args.collectstatic:
            begin = time.monotonic()
            call_command("collectstatic", interactive=False, verbosity=0)
            print(f"static files collected ({time.monotonic() - begin:.1f} s)", flush=True)
        out = StringIO()
        options = ["--username", args.admin_user, "--password-from-env", "TANDEM_ADMIN_PASSWORD"]
        call_command(
            "createadmin", *options, *(["--reset-password"] if args.reset_password else []), stdout=out
        )
        print(out.getvalue().splitlines()[0], flush=True)
    except CommandError as error:
        print(f"tandem: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
