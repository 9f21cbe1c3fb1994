from __future__ import annotations

from standalone.runner import main

raise SystemExit(main())
