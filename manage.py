#!/usr/bin/env python
"""Django's command-line utility for Tandem."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    from controlplane.env import ConfigError

    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    except ConfigError as error:
        sys.stderr.write(f"tandem: configuration error: {error}\n")
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
