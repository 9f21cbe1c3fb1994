"""The lock files are the dependency set: complete, hashed, consistent, and what every install uses."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import tomllib

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.support import ROOT

LOCKS = ROOT / "requirements"


def _pins(name: str) -> dict[str, str]:
    text = (LOCKS / name).read_text()
    return {
        canonicalize_name(pkg): version
        for pkg, version in re.findall(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;\\]+)", text, re.M)
    }


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_every_declared_dependency_is_locked_within_its_range():
    project = _project()
    for lock, declared in (
        ("runtime.lock", project["dependencies"]),
        ("dev.lock", project["dependencies"] + project["optional-dependencies"]["dev"]),
    ):
        pins = _pins(lock)
        for line in declared:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            assert name in pins, (
                f"{requirement.name} is declared but not in requirements/{lock}; run make lock"
            )
            assert requirement.specifier.contains(pins[name], prereleases=True), (
                f"requirements/{lock} pins {name}=={pins[name]}, outside {requirement.specifier}; "
                "run make lock"
            )


def test_runtime_and_dev_locks_agree_and_every_pin_has_hashes():
    runtime, dev = _pins("runtime.lock"), _pins("dev.lock")
    assert {name: version for name, version in runtime.items() if dev.get(name) != version} == {}
    for lock in ("runtime.lock", "dev.lock"):
        for block in re.split(r"\n(?=\S)", (LOCKS / lock).read_text()):
            if "==" in block.split("\n", 1)[0]:
                assert "--hash=sha256:" in block, f"{block.splitlines()[0]} has no hash in {lock}"


def test_this_environment_is_the_locked_one():
    pins = _pins("dev.lock")
    wrong = {}
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a platform-specific pin (e.g. colorama on Windows)
        if installed != version:
            wrong[name] = f"locked {version}, installed {installed}"
    assert wrong == {}, "the test environment differs from requirements/dev.lock (make install)"


def test_make_and_the_image_install_from_the_locks_with_hashes():
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r requirements/runtime.lock" in makefile
    assert "--require-hashes -r requirements/dev.lock" in makefile
    assert "--no-deps -e ." in makefile
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "COPY requirements/runtime.lock" in dockerfile
    assert "--require-hashes --no-deps -r runtime.lock" in dockerfile
    assert "pip install ." not in dockerfile


def test_the_declared_kubernetes_range_has_the_call_api_signature_kube_uses():
    from kubernetes.client import ApiClient

    declared = next(Requirement(d) for d in _project()["dependencies"] if d.startswith("kubernetes"))
    assert declared.specifier == SpecifierSet(">=37,<38")
    parameters = list(inspect.signature(ApiClient.call_api).parameters)
    assert parameters[1:3] == ["method", "url"], parameters  # 31-36 take resource_path first
    assert importlib.metadata.version("kubernetes").split(".")[0] == "37"
