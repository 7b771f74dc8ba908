"""The ``metatune`` Typer app. Services contribute commands (``profile``, ``train``...) through the
``metatune.cli`` entry-point group, so the CLI never imports a service directly. Plugins are only
imported when the command line may need them: ``metatune status`` must not pay for importing torch."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any

import typer

# typer (>= 0.28) carries its own copy of click, whose usage errors derive from TyperException
from typer import TyperException as ClickError
from typer.core import TyperGroup

from .. import __version__
from .adapter import adapter_app
from .cancel import cancel
from .connect import fail
from .demo import demo
from .events import events
from .kb import kb_app
from .platform_cmds import bus_init, down, restart, secrets, status, up
from .results import results
from .study import study_app
from .submit import submit


@contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    try:
        yield
    except ClickError as exc:
        # a usage error exits 2; ``metatune kb`` alone (NoArgsIsHelpError) shows the help as typer does
        if exc.exit_code != 2 or type(exc).__name__ == "NoArgsIsHelpError":
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        raise fail(exc.format_message().removeprefix("Invalid value: ") + hint, code=2) from None


class OneLineUsageErrors(TyperGroup):
    """Usage errors of every command (a bad enum value, ``--trials 0``, an unknown option) as one
    ``error:`` line on stderr and exit 2, like the CLI's own refusals, not typer's boxed panel."""

    # The contexts are typer's vendored click.Context, which typer exports under no public name.
    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _one_line_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _one_line_usage_errors():
            return super().invoke(ctx)


app = typer.Typer(
    cls=OneLineUsageErrors, help="MetaTune: carbon-aware LoRA fine-tuning.", no_args_is_help=True
)
CORE_COMMANDS: dict[str, Callable[..., Any]] = {
    "up": up,
    "down": down,
    "restart": restart,
    "status": status,
    "submit": submit,
    "cancel": cancel,
    "events": events,
    "secrets": secrets,
    "bus-init": bus_init,
    "results": results,
    "demo": demo,
}
for name, command in CORE_COMMANDS.items():
    app.command(name)(command)
app.add_typer(kb_app, name="kb")
CORE_GROUPS = {"study": study_app, "adapter": adapter_app}  # plugins add nothing to these
for name, group in CORE_GROUPS.items():
    app.add_typer(group, name=name)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"metatune {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit",
        callback=_print_version,
        is_eager=True,
    ),
) -> None:
    """MetaTune: carbon-aware LoRA fine-tuning."""
    # a command reports a server that does not answer in one `error:` line (exit 3); the
    # connection pool's own retry warnings would repeat it in several
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)


def _wants_plugins(argv: list[str]) -> bool:
    words = [a for a in argv[1:] if not a.startswith("-")]
    return not words or words[0] not in {*CORE_COMMANDS, *CORE_GROUPS}


def _load(group: str, target: typer.Typer) -> None:
    for ep in entry_points(group=group):
        try:
            loaded = ep.load()
            if isinstance(
                loaded, typer.Typer
            ):  # a command group (``metatune webhooks list|retry``)
                target.add_typer(loaded, name=ep.name)
            else:
                target.command(ep.name)(loaded)
        except Exception as exc:  # a broken plugin must not break the core commands
            logging.getLogger("metatune.cli").warning(
                "CLI plugin %s failed to load: %s", ep.name, exc
            )


if _wants_plugins(sys.argv):
    _load("metatune.cli", app)
    _load("metatune.cli.kb", kb_app)
