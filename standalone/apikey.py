"""Create an API key in the standalone demo's database: `make api-key ARGS="--purpose automation ..."`.

Runs `manage.py create_api_key` with the demo's own settings (var/standalone.env and its SQLite
file), so a script or CI job can get a key without the browser; it prints only the key.
"""

from __future__ import annotations

import os
import subprocess
import sys

from standalone.state import ROOT, read_env_file, state_dir


def main(argv: list[str]) -> int:
    directory = state_dir()
    values = read_env_file(directory / "standalone.env")
    if not values.get("SECRET_KEY"):
        sys.stderr.write("tandem: no demo state yet; run `make demo` once first\n")
        return 2
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": f"sqlite:///{directory / 'tandem.sqlite3'}",
            # Creating a key touches no Redis; the URL only has to be well-formed.
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            "SECRET_KEY": values["SECRET_KEY"],
            "FIELD_ENCRYPTION_KEYS": values["FIELD_ENCRYPTION_KEYS"],
            "TANDEM_HTTPS": "false",
            "TANDEM_STANDALONE": "true",
            "LOG_LEVEL": "warning",
        }
    )
    args = argv or ["--purpose", "automation", "--kind", "management", "--scopes", "deploy,topologies:read"]
    if "--user" not in args:
        args = ["--user", os.environ.get("TANDEM_ADMIN_USER", "").strip() or "admin", *args]
    return subprocess.call([sys.executable, "manage.py", "create_api_key", *args], cwd=ROOT, env=env)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
