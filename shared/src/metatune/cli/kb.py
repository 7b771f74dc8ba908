"""``metatune kb ...``: the knowledge base of fine-tuning runs.

Core sub-commands live here; services contribute more through the ``metatune.cli.kb`` entry-point
group (the trainer-agent's ``build``, which trains), so this module never imports a service.
"""

from __future__ import annotations

import typer

kb_app = typer.Typer(help="The knowledge base of fine-tuning runs: build, import, stats.", no_args_is_help=True)
