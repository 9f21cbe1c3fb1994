"""`python -m sandbox up ...` — see `sandbox/README.md`."""

from __future__ import annotations

import sys

from sandbox.cli import main

if __name__ == "__main__":
    sys.exit(main())
