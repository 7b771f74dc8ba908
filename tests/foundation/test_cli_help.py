"""Each command's help reads as click tools' do: every option says what it is for, a flag shows no
value type (``--wait``, not ``--wait <bool>``), and a default shows as ``[default: ...]``, also for
an option whose unset value lets a study file decide."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import typer
from typer.core import TyperGroup, TyperOption

from metatune_cli.cli.main import app


def commands() -> Iterator[tuple[str, object]]:
    """Every command, core and plugin, loaded, with its path (``kb build``)."""
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    with root.make_context("metatune", ["status"], resilient_parsing=True) as ctx:

        def walk(group: TyperGroup, path: list[str]) -> Iterator[tuple[str, object]]:
            for name in group.list_commands(ctx):
                command = group.get_command(ctx, name)
                if isinstance(command, TyperGroup):
                    yield from walk(command, [*path, name])
                elif command is not None:
                    yield " ".join([*path, name]), command

        yield from walk(root, [])


def help_page(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "metatune_cli.cli", *args, "--help"],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_option_of_every_command_says_what_it_is_for() -> None:
    found = list(commands())
    assert {"submit", "kb build", "webhooks list", "profile"} <= {path for path, _ in found}
    missing = [
        f"{path} {param.opts[0]}"
        for path, command in found
        for param in getattr(command, "params", [])
        if isinstance(param, TyperOption) and not (param.help or "").strip()
    ]
    assert missing == []


def test_submit_help_shows_flags_plainly_and_the_defaults() -> None:
    page = help_page("submit")
    assert "<bool>" not in page
    for row in ("--wait ", "--json ", "--allow-dataset-outside "):
        assert row in page
    for default in (
        "[default: all-MiniLM-L6-v2]",
        "[default: classification]",
        "[default: 24h]",
        "[default: 3]",
        "[default: 1000]",
        "[default: 1]",
        "[default: greenest]",
        "[default: 48.0]",
    ):
        assert default in page, default
    assert "\\[" not in page


def test_the_top_level_help_shows_its_flags_plainly() -> None:
    page = help_page()
    assert "--version " in page and "<bool>" not in page
