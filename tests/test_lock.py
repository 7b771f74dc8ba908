"""requirements.lock agrees with what the packages declare: every dependency of every package (and
of requirements-dev.txt) is pinned there at a version its specifier allows. A dependency added or
re-bounded without `scripts/lock` fails here, before a fresh install could differ from CI."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PYPROJECTS = [
    REPO / "shared" / "pyproject.toml",
    REPO / "cli" / "pyproject.toml",
    *sorted(REPO.glob("services/*/pyproject.toml")),
]


def _locked() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def _ours() -> set[str]:
    return {canonicalize_name(tomllib.loads(p.read_text())["project"]["name"]) for p in PYPROJECTS}


def _declared() -> list[tuple[str, Requirement]]:
    found = []
    for path in PYPROJECTS:
        project = tomllib.loads(path.read_text())["project"]
        where = str(path.relative_to(REPO))
        found += [(where, Requirement(text)) for text in project.get("dependencies", [])]
        for extra, texts in project.get("optional-dependencies", {}).items():
            found += [(f"{where}[{extra}]", Requirement(text)) for text in texts]
    for line in (REPO / "requirements-dev.txt").read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            found.append(("requirements-dev.txt", Requirement(text)))
    return found


def _problems(declared: list[tuple[str, Requirement]]) -> list[str]:
    locked, ours = _locked(), _ours()
    problems = []
    for where, requirement in declared:
        name = canonicalize_name(requirement.name)
        if name in ours or (requirement.marker and not requirement.marker.evaluate()):
            continue
        if name not in locked:
            problems.append(f"{where}: {requirement} is not in requirements.lock")
        elif not requirement.specifier.contains(locked[name], prereleases=True):
            problems.append(f"{where}: {requirement} but the lock has {locked[name]}")
    return problems


def test_every_declared_dependency_is_locked_at_an_allowed_version() -> None:
    problems = _problems(_declared())
    assert problems == [], "run scripts/lock:\n" + "\n".join(problems)


def test_a_dependency_missing_from_the_lock_or_outside_its_pin_is_reported() -> None:
    planted = [("planted", Requirement("numpy>=9")), ("planted", Requirement("left-pad>=1"))]
    problems = _problems(planted)
    assert len(problems) == 2
    assert "but the lock has 2." in problems[0] and "not in requirements.lock" in problems[1]


def test_torch_is_locked_to_the_cpu_build() -> None:
    assert str(_locked()["torch"]) == "2.13.0+cpu"  # the CUDA build is a multi-GB download
