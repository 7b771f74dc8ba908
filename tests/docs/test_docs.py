"""The READMEs cannot drift from the code or the committed benchmark JSON, and their links resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def docs_files() -> list[Path]:
    """Every README and every page under docs/ (what a reader follows links through)."""
    found = [
        *REPO.glob("README.md"),
        *REPO.glob("services/*/README.md"),
        *REPO.glob("docs/**/*.md"),
    ]
    found += [*REPO.glob("services/*/*.md"), *REPO.glob("examples/*.md")]
    return sorted(set(found))


def test_every_generated_block_matches_its_sources(render_docs: ModuleType) -> None:
    stale = [
        str(o.path.relative_to(REPO))
        for o in map(render_docs.render_file, render_docs.readmes())
        if o.new != o.old
    ]
    assert not stale, f"run `.venv/bin/python scripts/render_docs.py`: {stale} are out of date"


def test_the_top_readme_has_the_settings_table(render_docs: ModuleType) -> None:
    readme = (REPO / "README.md").read_text()
    assert "<!-- BEGIN GENERATED: settings -->" in readme
    for cls in render_docs.settings_classes():
        for name, field in cls.model_fields.items():
            assert f"`{render_docs.env_name(cls, name, field)}`" in readme


def test_every_settings_class_is_rendered(render_docs: ModuleType) -> None:
    listed = {spec.split(":")[1] for spec in render_docs.SETTINGS_CLASSES}
    declared = set()
    for path in [*REPO.glob("*/src/**/*.py"), *REPO.glob("services/*/src/**/*.py")]:
        declared |= set(re.findall(r"^class (\w+)\([^)]*Settings\)", path.read_text(), re.M))
    assert declared, "no settings class found: the scan is broken"
    assert declared <= listed, (
        f"add to SETTINGS_CLASSES in scripts/render_docs.py: {declared - listed}"
    )


class _Sample(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMPLE_")
    documented: int = Field(3, description="a documented setting")
    api_password: str = Field("hunter2", description="a secret")
    undocumented: float = 1.5


def test_an_undocumented_setting_fails_the_table(
    render_docs: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render_docs, "settings_classes", lambda: [_Sample])
    with pytest.raises(render_docs.DocsError, match="without a description"):
        render_docs.render_settings()


def test_secrets_show_no_default(render_docs: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    class Documented(_Sample):
        undocumented: float = Field(1.5, description="now documented")

    monkeypatch.setattr(render_docs, "settings_classes", lambda: [Documented])
    text = render_docs.render_settings()
    assert "`SAMPLE_DOCUMENTED` | integer | `3` | a documented setting" in text
    assert "SAMPLE_API_PASSWORD" in text
    assert "hunter2" not in text


def test_each_results_json_carries_its_command_and_is_used(render_docs: ModuleType) -> None:
    readmes = "".join(p.read_text() for p in render_docs.readmes())
    results = sorted((REPO / "docs" / "results").glob("*.json"))
    assert results
    for path in results:
        data = json.loads(path.read_text())
        assert data["command"].startswith(
            ("python bench/", "OMP_NUM_THREADS=1", "nice ", ".venv/bin/metatune ")
        ), path
        assert "--json" in data["command"], path
        assert data["provenance"] == "measured", path  # a figure comes from a run, never from text
        assert data["measured_on"], path
        assert f"docs/results/{path.name}" in readmes, f"{path.name} is quoted by no README"


def test_a_changed_figure_makes_the_table_stale(
    render_docs: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The check reads the JSON: editing a figure there (not in the README) is caught."""
    source = REPO / "docs" / "results" / "profiler_bench.json"
    data = json.loads(source.read_text())
    data["runs"][0]["peak_rss_mb"] += 100
    (tmp_path / "profiler_bench.json").write_text(json.dumps(data))
    for other in (REPO / "docs" / "results").glob("*.json"):
        if other.name != source.name:
            (tmp_path / other.name).write_text(other.read_text())
    monkeypatch.setattr(render_docs, "RESULTS", tmp_path)
    outcome = render_docs.render_file(REPO / "services" / "profiler" / "README.md")
    assert outcome.new != outcome.old


@pytest.mark.parametrize("doc", docs_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve_inside_the_repository(doc: Path) -> None:
    text = doc.read_text()
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(REPO), f"{doc.name}: {target} is outside the repository"
        assert path.exists(), f"{doc.relative_to(REPO)}: {target} does not exist"
    assert "../shared" not in text, f"{doc.name} cites ../shared, outside the repository"
    assert "/work/" not in text, f"{doc.name} cites a machine path"


@pytest.mark.parametrize(
    "doc",
    [REPO / "README.md", *sorted(REPO.glob("services/*/README.md"))],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_lines_are_short(doc: Path) -> None:
    """Prose and commands wrap at 120 characters; table rows and lines with a link may not."""
    long = [
        n
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        if len(line) > 120 and not line.startswith("|") and "](" not in line
    ]
    assert not long, f"{doc.relative_to(REPO)}: lines over 120 characters: {long}"
