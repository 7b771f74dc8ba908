"""``metatune demo``: three studies through the whole platform, with what MetaTune saved."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..settings import CliSettings
from ..tables import WIDE_HELP
from .connect import fail
from .output import JSON_HELP, logs_to_stderr, print_json
from .platform_cmds import _restart, _start_all
from .platform_cmds import console as platform_console


def _start_platform(settings: CliSettings) -> None:
    """``metatune up --simulate`` with the demo's settings, its messages on the demo's stream."""
    with logs_to_stderr(platform_console, True):
        try:
            _start_all(settings, simulate=True, wait=True)
        except typer.Exit as exc:  # `fail` printed the reason
            raise RuntimeError("the platform did not start (reason above)") from exc


def _restart_instance(settings: CliSettings, instance: str) -> None:
    """``metatune restart INSTANCE`` with the demo's settings (not waiting for its heartbeat)."""
    with logs_to_stderr(platform_console, True):
        _restart(settings, instance, wait=False)


def demo(
    seed: int = typer.Option(0, help="Seed of the run: same seed, same studies, grids and hours"),
    fast: bool = typer.Option(
        False,
        "--fast",
        help="Shorter variant: 300 rows per dataset, one epoch a trial, an hour every 15 s",
    ),
    data: Path = typer.Option(
        Path("examples/demo"),
        exists=True,
        file_okay=False,
        help="Folder of the demo datasets (the committed ones by default)",
    ),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
    wide: bool = typer.Option(False, "--wide", help=WIDE_HELP),
    env: bool = typer.Option(
        False,
        "--env",
        help="Print the exports that point the CLI at the running demo, and exit: "
        'eval "$(metatune demo --env)"',
    ),
) -> None:
    """Start the platform on embedded defaults with a simulated clock and four datacenters, submit
    three studies, show them through the bus as they run, and print what they saved. The platform
    keeps running afterwards (dashboard); `metatune down` stops it."""
    from ..demo import Demo, DemoStepFailed, scenario
    from ..demo.stack import cli_env

    if env:
        exports = cli_env(CliSettings())
        if exports is None:
            raise fail("no demo is running (start one with `metatune demo`)", code=1)
        typer.echo(exports, nl=False)
        return
    from ..demo.stack import DemoAlreadyRunning
    from ..demo.view import closing_summary, print_closing

    console = Console(stderr=json_output)
    if not console.is_terminal:  # a log or a pipe: wide enough for the tables
        console = Console(stderr=json_output, width=160)
    runner = Demo(
        scenario(seed, fast), data, CliSettings(), console, _start_platform, _restart_instance
    )
    try:
        result = runner.run()
    except DemoAlreadyRunning as exc:
        raise fail(str(exc)) from None
    except DemoStepFailed as exc:
        raise fail(
            f"{exc} (the platform keeps running for a look; `metatune down` stops it)", code=1
        ) from None
    if json_output:
        print_json(result)
        return
    print_closing(console, result, wide)
    console.print(closing_summary(result), highlight=False)
    for row in result["studies"]:
        console.print(
            f"dashboard of {row['name']}: {result['dashboard']}/studies/{row['study_id']}"
        )
    console.print(
        f"the platform keeps running (logs in {result['logs']}); point the CLI at it with "
        '`eval "$(metatune demo --env)"`, stop it with `metatune down`'
    )
