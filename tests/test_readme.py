"""The README is the first thing a user runs; keep it true."""

from __future__ import annotations

import re

from tests.support import ROOT

README = (ROOT / "README.md").read_text()


def _settings_variables() -> set[str]:
    source = (ROOT / "controlplane" / "settings.py").read_text()
    return set(re.findall(r"env_(?:str|bool|int|list|choice|url|seconds)\(\s*\"([A-Z][A-Z0-9_]+)\"", source))


def test_configuration_table_lists_every_variable_the_settings_read():
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", README, flags=re.M))
    variables = _settings_variables()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "FIELD_ENCRYPTION_KEYS"} <= variables
    missing = sorted(variables - documented)
    assert not missing, f"add a row for {', '.join(missing)} to the Configuration table in README.md"


def test_quick_start_is_exactly_the_two_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert [block.strip() for block in blocks] == ["make demo", "make test"]


def test_images_the_readme_shows_are_committed():
    for path in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README):
        assert (ROOT / path).is_file(), path
