"""The ``metatune`` Typer app. Services contribute commands (``profile``, ``train``...) through the
``metatune.cli`` entry-point group, so the CLI never imports a service directly.

Every command, core or plugin, is imported only when it runs (or shows its own help): ``metatune
--version``, ``--help`` and a Tab completion must not pay for torch, pandas, pydantic or the NATS
client. The help page lists core commands with the one-line help kept in ``CORE`` and plugins with
the help their source declares, read without running it (:func:`declared_help`); tests check both
against the loaded commands."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar

import typer

# typer (>= 0.28) carries its own copy of click, whose usage errors derive from TyperException
from typer import TyperException as ClickError
from typer.core import TyperCommand, TyperGroup, TyperOption

from metatune import __version__

from .connect import fail

_display_type_rich = TyperOption.display_type_rich


def _no_type_for_flags(self: TyperOption, ctx: Any) -> str | None:
    """A flag takes no value: its help row shows none (``--wait``, not typer 0.29's ``--wait
    <bool>``), as click's help and typer's plain-text help do."""
    if self.is_flag and self.metavar is None:
        return None
    return _display_type_rich(self, ctx)


TyperOption.display_type_rich = _no_type_for_flags  # type: ignore[method-assign]


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


@dataclass(frozen=True)
class Core:
    """A core command: ``module:attribute`` in this package, and the first paragraph of its help."""

    target: str
    help: str
    cls: type[TyperGroup] | None = None  # for a group: the click class it is built with

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)


def _as_command(name: str, target: Any, group_cls: type[TyperGroup] | None = None) -> Any:
    """The click command that registering ``target`` (a function or a Typer app) as ``name`` makes."""
    holder = typer.Typer(add_completion=False)
    if group_cls is not None:  # a core group built with a class of its own (``kb``)
        holder.add_typer(target, name=name, cls=group_cls)
    elif isinstance(target, typer.Typer):  # a command group (``metatune webhooks list|retry``)
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


def first_paragraph(text: str) -> str:
    """A help text's first paragraph on one line, as a listing shows it."""
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


def declared_help(entry_point: EntryPoint) -> str | None:
    """The one-line help of a plugin command, read from its module's source without importing it:
    the docstring of the function the entry point names, or the ``help=`` string of the
    ``typer.Typer(...)`` it is assigned. None when the source does not say (the listing then imports
    the plugin); only the module's package ``__init__`` runs, to locate the file."""
    module, _, attribute = entry_point.value.partition(":")
    try:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            return None
        with open(spec.origin, encoding="utf-8") as source:
            tree = ast.parse(source.read(), spec.origin)
    except (ImportError, OSError, SyntaxError, ValueError):
        return None
    text: object = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == attribute:
            text = ast.get_docstring(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _assigns(node, attribute):
            text = _help_keyword(node.value)
    return first_paragraph(text) if isinstance(text, str) and text else None


def _assigns(node: ast.Assign | ast.AnnAssign, name: str) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


def _help_keyword(value: ast.expr | None) -> object:
    """The constant ``help=`` of a call such as ``typer.Typer(help="...")``, if it is one."""
    if not isinstance(value, ast.Call):
        return None
    for keyword in value.keywords:
        if keyword.arg == "help" and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    return None


class NotLoaded(TyperCommand):
    """A command known by name and one-line help (a core command's from ``CORE``, a plugin's from
    its source once listed), not imported yet."""

    def __init__(
        self,
        name: str,
        load: Callable[[], Any],
        help: str | None = None,
        group_cls: type[TyperGroup] | None = None,
    ) -> None:
        super().__init__(name, help=help)
        self.load = load
        self.group_cls = group_cls


class LazyGroup(TyperGroup):
    """A group whose commands are imported when asked for. Plugins come from the entry points of
    ``plugin_group``: the entry point's name is the command's, its object a function or Typer app."""

    plugin_group: ClassVar[str]
    core: ClassVar[dict[str, Core]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._listing = False
        for name, spec in self.core.items():
            self.commands.setdefault(name, NotLoaded(name, spec.load, spec.help, spec.cls))
        self._plugins = {ep.name: ep for ep in entry_points(group=self.plugin_group)}
        for ep in self._plugins.values():
            self.commands.setdefault(ep.name, NotLoaded(ep.name, ep.load))

    @contextmanager
    def _only_listing(self) -> Iterator[None]:
        # a help page or a completion needs names and one-line help, not the commands themselves
        saved, self._listing = self._listing, True
        try:
            yield
        finally:
            self._listing = saved

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with self._only_listing():
            super().format_help(ctx, formatter)

    def shell_complete(self, ctx: Any, incomplete: str) -> Any:
        with self._only_listing():
            return super().shell_complete(ctx, incomplete)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if isinstance(command, NotLoaded) and self._listing and command.help is None:
            plugin = self._plugins.get(cmd_name)
            command.help = declared_help(plugin) if plugin else None  # read once, when listed
        if not isinstance(command, NotLoaded) or (self._listing and command.help):
            return command
        try:
            loaded = _as_command(cmd_name, command.load(), command.group_cls)
        except Exception as exc:  # a broken plugin must not break the other commands
            if cmd_name in self.core:
                raise
            logging.getLogger("metatune.cli").warning(
                "CLI plugin %s failed to load: %s", cmd_name, exc
            )
            del self.commands[cmd_name]
            return None
        self.commands[cmd_name] = loaded
        return loaded


class KbGroup(LazyGroup):
    """``metatune kb``: the knowledge-base package's commands (``metatune.cli.kb`` entry points)."""

    plugin_group = "metatune.cli.kb"


CORE = {
    "up": Core(
        "platform_cmds:up",
        "Start the platform: NATS and PostgreSQL (embedded if none answers), then every service.",
    ),
    "down": Core(
        "platform_cmds:down",
        "Stop what `metatune up` or `metatune demo` started (and nothing else).",
    ),
    "restart": Core(
        "platform_cmds:restart",
        "Restart one service (or one agent instance) of the running platform; the rest keep running.",
    ),
    "status": Core(
        "platform_cmds:status",
        "Show infrastructure and service health; exit 1 when a service is down, 3 when NATS is"
        " unreachable.",
    ),
    "submit": Core(
        "submit:submit",
        "Upload a dataset and request a study; prints the study id (with --json: also the dataset's"
        " location, the event id and whether the profiler checked the dataset first). Given a study"
        " file (docs/study.schema.json), its settings apply and the flags given override them.",
    ),
    "cancel": Core(
        "cancel:cancel",
        "Cancel JOB_ID: publish metatune.jobs.cancelled.<tenant>; prints the event id (nothing is published"
        " for a job that has already ended; one the scheduler does not know is an error, exit 1)."
        " With --study: publish metatune.studies.cancelled.<tenant>, then cancel each trial not ended.",
    ),
    "events": Core(
        "events:events",
        "Tail the event log (stream METATUNE), newest last. The hourly forecasts are left out unless"
        " asked for (--forecasts, --kind forecasts or a forecasts --subject).",
    ),
    "secrets": Core(
        "platform_cmds:secrets",
        "Write NATS credentials (an nkey per service, agent and tenant; the admin's password; the"
        " server's auth config) to METATUNE_NATS_SECRETS_DIR, and the telemetry dashboard's read-only"
        " tokens (dashboard.token, the admin's: every study; one per tenant: its own; --rotate keeps"
        " the previous ones valid for the overlap), mode 0600 (--group: 0640, that group's); prints"
        " file names, never secrets. A running embedded NATS is told to reload its users.",
    ),
    "bus-init": Core(
        "platform_cmds:bus_init",
        "Create the streams, KV buckets and object stores, and set the clock, as the admin: services"
        " run without the right to create them (compose runs this once before the services).",
    ),
    "results": Core(
        "results:results",
        "STUDY's trials: configuration, metrics, energy (Wh), emissions as charged at the forecast"
        " intensity and realised (gCO2eq, observed hours re-priced).",
    ),
    "demo": Core(
        "demo:demo",
        "Start the platform on embedded defaults with a simulated clock and four datacenters, submit"
        " three studies, show them through the bus as they run, and print what they saved. The"
        " platform keeps running afterwards (dashboard); `metatune down` stops it.",
    ),
    "kb": Core(
        "kb:kb_app", "The knowledge base of fine-tuning runs: build, import, stats.", cls=KbGroup
    ),
    # plugins add nothing to these two
    "study": Core(
        "study:study_app", "Studies: what was submitted, profiled, requested, trained and stopped."
    ),
    "adapter": Core("adapter:adapter_app", "Trained LoRA adapters."),
}


class MetatuneGroup(OneLineUsageErrors, LazyGroup):
    """``metatune``: the core commands and groups, and the services' (``metatune_cli.cli``)."""

    plugin_group = "metatune.cli"
    core = CORE


app = typer.Typer(
    cls=MetatuneGroup, help="MetaTune: carbon-aware LoRA fine-tuning.", no_args_is_help=True
)


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
