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
    REPO / "kb" / "pyproject.toml",
]


def _locked(lock: str = "requirements.lock") -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (REPO / lock).read_text().splitlines():
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
    return found + _listed("requirements-dev.txt")


def _listed(name: str) -> list[tuple[str, Requirement]]:
    """The requirements a requirements file names (not its ``-c``/``-r`` lines)."""
    texts = [line.split("#", 1)[0].strip() for line in (REPO / name).read_text().splitlines()]
    return [(name, Requirement(text)) for text in texts if text and not text.startswith("-")]


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


def test_the_test_only_lock_keeps_the_main_pins_and_stays_out_of_the_runtime_install() -> None:
    """requirements-test.lock (scripts/install, not --runtime) pins what requirements-test.in
    names, every package both locks hold at one version, and none of its own in requirements.lock
    (which the runtime install installs)."""
    main, test = _locked(), _locked("requirements-test.lock")
    assert {name: (main[name], v) for name, v in test.items() if main.get(name, v) != v} == {}
    wanted = _listed("requirements-test.in")
    assert wanted, "requirements-test.in names no package"
    for _, requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name not in main, f"{name} is in requirements.lock: the runtime install has it"
        assert name in test and requirement.specifier.contains(test[name]), "run scripts/lock"
