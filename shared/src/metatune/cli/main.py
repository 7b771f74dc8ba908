"""The ``metatune`` Typer app. Services contribute commands (``profile``, ``train``...) through the
``metatune.cli`` entry-point group, so the CLI never imports a service directly."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

import typer

from .events import events
from .platform_cmds import down, status, up
from .submit import submit

app = typer.Typer(help="MetaTune: carbon-aware LoRA fine-tuning.", no_args_is_help=True, add_completion=False)
app.command()(up)
app.command()(down)
app.command()(status)
app.command()(submit)
app.command()(events)

for ep in entry_points(group="metatune.cli"):
    try:
        app.command(ep.name)(ep.load())
    except Exception as exc:  # a broken plugin must not break the core commands
        logging.getLogger("metatune.cli").warning("CLI plugin %s failed to load: %s", ep.name, exc)
