"""`make test` collects every app's tests: pytest reads only the directories listed in pyproject's
`testpaths`, so an app left out would have its tests silently skipped by CI."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", "node_modules", "var", "static", "bench"}


def test_every_directory_holding_tests_is_collected():
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"]
    )
    holding = {
        path.relative_to(ROOT).parts[0]
        for path in ROOT.glob("*/**/test_*.py")
        if path.relative_to(ROOT).parts[0] not in SKIP and not path.relative_to(ROOT).parts[0].startswith(".")
    }
    assert holding, "no test files found"
    assert holding <= listed, f"tests in {sorted(holding - listed)} are not in pyproject's testpaths"
