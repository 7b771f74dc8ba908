"""``metatune kb``: the group of the knowledge base's commands.

Its commands are the ``metatune.cli.kb`` entry points of the knowledge-base package (``kb/``:
build, merge, import, portfolio, stats, fit-stopper), loaded when one runs, so the CLI imports
neither that package nor a service.
"""

from __future__ import annotations

import typer

kb_app = typer.Typer(
    help="The knowledge base of fine-tuning runs: build, import, stats.", no_args_is_help=True
)
