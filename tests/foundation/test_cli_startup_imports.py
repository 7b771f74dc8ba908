"""``metatune --help``, ``--version`` and a Tab completion import no heavy library: the commands,
core and plugin, are imported when they run, so the CLI answers at once (bench/cli_startup_bench.py
measures how fast)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest
import typer

from metatune_cli.cli.main import CORE, app, declared_help, first_paragraph

HEAVY = ("torch", "transformers", "gpytorch", "pandas", "sklearn", "faststream", "nats")

# Runs the CLI as the `metatune` script does, then reports which heavy modules and which plugin
# command modules it imported.
PROBE = f"""
import json, sys
from importlib.metadata import entry_points
from metatune_cli.cli.main import app
try:
    app(prog_name="metatune")
except SystemExit:
    pass
plugins = {{ep.module for g in ("metatune.cli", "metatune.cli.kb") for ep in entry_points(group=g)}}
print(json.dumps([m for m in [*{HEAVY!r}, *sorted(plugins)] if m in sys.modules]), file=sys.stderr)
"""

COMPLETE_TOP_LEVEL = {
    "_METATUNE_COMPLETE": "complete_bash",
    "COMP_WORDS": "metatune ",
    "COMP_CWORD": "1",
}


def plugin_names() -> list[str]:
    return [ep.name for ep in entry_points(group="metatune.cli")]


def run_probe(args: list[str], **env: str) -> tuple[str, list[str]]:
    """The CLI's stdout, and the heavy modules and plugin command modules it imported."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("_METATUNE_")}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env={**base, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout, json.loads(result.stderr.strip().splitlines()[-1])


def test_the_plugins_are_installed() -> None:
    # without them the checks below would pass vacuously
    assert {"profile", "train", "recommend", "forecaster", "webhooks"} <= set(plugin_names())


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--help"], {}),
        ([], {}),
        (["--version"], {}),
        ([], COMPLETE_TOP_LEVEL),
        (["kb", "--help"], {}),
    ],
    ids=["help", "no-arguments", "version", "completion", "kb-help"],
)
def test_listing_the_commands_imports_no_heavy_library_nor_plugin(
    args: list[str], env: dict[str, str]
) -> None:
    _, imported = run_probe(args, **env)
    assert imported == []


def test_the_help_page_lists_every_core_and_plugin_command() -> None:
    out, _ = run_probe(["--help"])
    listed = {line.strip("│ ").split(" ")[0] for line in out.splitlines()}
    assert {*CORE, *plugin_names()} <= listed


def test_completion_offers_every_core_and_plugin_command() -> None:
    out, _ = run_probe([], **COMPLETE_TOP_LEVEL)
    assert set(out.split()) == {*CORE, *plugin_names()}


def test_the_version_is_printed() -> None:
    out, _ = run_probe(["--version"])
    assert out.startswith("metatune ")


def test_the_help_kept_for_core_commands_is_their_own() -> None:
    """The one-line help main.py lists without importing a command is the first paragraph of the
    command's help (its docstring): a changed docstring fails here until CORE follows."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    ctx = typer.Context(group)
    for name, spec in CORE.items():
        command = group.get_command(ctx, name)
        assert command is not None and command.help is not None, name
        first_paragraph = inspect.cleandoc(command.help).split("\n\n")[0]
        assert " ".join(first_paragraph.split()) == spec.help, name


@pytest.mark.parametrize(("group", "path"), [("metatune.cli", []), ("metatune.cli.kb", ["kb"])])
def test_the_help_read_from_a_plugins_source_is_its_own(group: str, path: list[str]) -> None:
    """What a listing shows for a plugin without importing it is the first paragraph of the help
    of the command that loading it builds."""
    command = typer.main.get_command(app)
    ctx = typer.Context(command)
    for name in path:
        assert isinstance(command, typer.core.TyperGroup)
        command = command.get_command(ctx, name)
        ctx = typer.Context(command, parent=ctx)
    assert isinstance(command, typer.core.TyperGroup)
    plugins = entry_points(group=group)
    assert plugins
    for ep in plugins:
        loaded = command.get_command(ctx, ep.name)
        assert loaded is not None and loaded.help is not None, ep.name
        assert declared_help(ep) == first_paragraph(loaded.help), ep.name


def test_declared_help_reads_each_form_without_running_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plugin_source_probe.py").write_text(
        "raise RuntimeError('imported')\n"
        "import typer\n"
        "def command() -> None:\n"
        '    """Do one thing.\n\n    More about it."""\n'
        'group = typer.Typer(help="A group of\\n   things.")\n'
        'annotated: typer.Typer = typer.Typer(help="Annotated.")\n'
        "bare = typer.Typer()\n"
        "def silent() -> None:\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    def help_of(value: str) -> str | None:
        return declared_help(EntryPoint(name="x", value=value, group="metatune.cli"))

    assert help_of("plugin_source_probe:command") == "Do one thing."
    assert help_of("plugin_source_probe:group") == "A group of things."
    assert help_of("plugin_source_probe:annotated") == "Annotated."
    assert help_of("plugin_source_probe:bare") is None  # the listing imports such a plugin
    assert help_of("plugin_source_probe:silent") is None
    assert help_of("plugin_source_probe:missing") is None
    assert help_of("no_such_module_anywhere:command") is None
    assert "plugin_source_probe" not in sys.modules


def test_a_command_s_help_imports_that_command_not_the_bus_client() -> None:
    """``submit --help`` loads the submit command and the contracts its options name; the bus
    client, the model card and numpy come only when a command runs."""
    probe = PROBE.replace(
        repr(HEAVY), repr((*HEAVY, "numpy", "huggingface_hub", "metatune_cli.client.aio"))
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, "submit", "--help"],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--max-train-rows" in result.stdout
    assert json.loads(result.stderr.strip().splitlines()[-1]) == []
