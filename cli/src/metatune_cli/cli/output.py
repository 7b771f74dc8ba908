"""A command's result as one JSON object on stdout (``--json``); progress and logs go to stderr."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from pydantic import BaseModel
from rich.console import Console

from ..tables import WIDE_HELP

JSON_HELP = "Print the result as one JSON object on stdout (progress and logs on stderr)"
# parameters several commands share, defined once
STUDY_ARGUMENT = typer.Argument(
    ..., help="Study id, or a unique prefix of it (as `study list` shows)"
)
JSON_FLAG = typer.Option(False, "--json", help="Print JSON")
WIDE_FLAG = typer.Option(False, "--wide", help=WIDE_HELP)


def _plain(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def print_json(value: object) -> None:
    """Print ``value`` (dicts, lists, pydantic models, dataclasses; anything else as text) as one JSON document."""
    print(json.dumps(value, indent=2, default=_plain), flush=True)


@contextmanager
def logs_to_stderr(console: Console, when: bool = True) -> Iterator[None]:
    """While ``when``, what ``console`` prints goes to stderr, leaving stdout to the JSON result."""
    saved = console.stderr
    console.stderr = saved or when
    try:
        yield
    finally:
        console.stderr = saved
