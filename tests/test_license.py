"""The repository is Apache-2.0: the LICENSE file, every package's metadata and the AsyncAPI
document say the same."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = [
    REPO / "shared",
    REPO / "cli",
    *sorted(p.parent for p in REPO.glob("services/*/pyproject.toml")),
]


def test_the_license_file_is_the_apache_license_2() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text


@pytest.mark.parametrize("package", PACKAGES, ids=lambda path: path.name)
def test_each_package_names_the_license(package: Path) -> None:
    project = tomllib.loads((package / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"


def test_the_asyncapi_document_names_the_same_license() -> None:
    document = json.loads((REPO / "docs" / "asyncapi.json").read_text(encoding="utf-8"))
    assert document["info"]["license"]["name"] == "Apache-2.0"
