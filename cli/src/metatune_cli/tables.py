"""How the CLI's tables are laid out, the way Rich / Typer tools people know do it.

* **Compact** unless ``--wide``, wherever the wide layout would not fit: stdout is not a terminal
  (a pipe, a file, a log) or the terminal is narrower than :data:`WIDE_TERMINAL`. At most
  :data:`COMPACT_WIDTH` characters a line, the columns a person reads first (names before ids, ids
  shortened), numbers with their units (:mod:`metatune.units`); a long cell wraps, never cut to
  ``…``.
* **Wide** (``--wide``, or a wide terminal): every column; not a terminal, each line as long as
  its cells need.
* **Plain text** when not a terminal: no box drawing, no colour (Rich writes none to a pipe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.console import Console
from rich.table import Table

COMPACT_WIDTH = 80
WIDE_TERMINAL = 120  # a terminal at least this wide shows the wide layout
UNBOUNDED = 1000  # the wide layout's width when not a terminal
WIDE_HELP = (
    "Every column (by default a table fits 80 columns when stdout is not a terminal or is narrow)"
)


Cell = str | tuple[str, str]  # a pair: (compact, wide)


@dataclass(frozen=True)
class Column:
    header: str
    wide_only: bool = False  # left out of the compact layout
    justify: Literal["left", "right"] = "left"
    compact_header: str | None = None  # a shorter header for the compact layout
    no_wrap: bool = False  # a name: never broken across lines
    compact_width: int | None = (
        None  # a fixed width in the compact layout (rows printed apart align)
    )


def compact(console: Console, wide: bool) -> bool:
    """Whether ``console`` gets the compact layout."""
    return not wide and (not console.is_terminal or console.width < WIDE_TERMINAL)


def render(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    wide: bool,
    title: str | None = None,
    caption: str | None = None,
    header: bool = True,
) -> None:
    """Print ``rows`` (every column's cell, in ``columns``' order; a pair: the compact layout's
    cell and the wide one's, as a short id and the whole) in the layout ``console`` and ``wide``
    call for. ``header=False``: the rows alone, no header and no blank edge lines (rows that
    follow a table printed before, as ``events --follow`` prints them)."""
    small = compact(console, wide)
    keep = [i for i, c in enumerate(columns) if not (small and c.wide_only)]
    table = Table(
        title=title,
        caption=caption,
        box=box.SIMPLE_HEAD if console.is_terminal else None,
        pad_edge=False,
        title_justify="left",
        caption_justify="left",
        show_header=header,
        show_edge=header,
    )
    for i in keep:
        column = columns[i]
        table.add_column(
            column.compact_header if small and column.compact_header else column.header,
            justify=column.justify,
            overflow="fold",
            no_wrap=column.no_wrap,
            width=column.compact_width if small else None,
        )
    for cells in rows:
        table.add_row(*(_shown(cells[i], small) for i in keep))
    if small:
        width = min(console.width, COMPACT_WIDTH)
    else:  # a pipe asked for every column gets each line as long as its cells need
        width = console.width if console.is_terminal else UNBOUNDED
    if width <= console.width:
        console.print(table, width=width)
        return
    saved = console.width  # Rich prints no wider than its console: widen it for this table
    console.width = width
    try:
        console.print(table)
    finally:
        console.width = saved


def _shown(cell: Cell, small: bool) -> str:
    if isinstance(cell, tuple):
        return cell[0] if small else cell[1]
    return cell


def short_id(value: str | None, digits: int = 8) -> tuple[str, str]:
    """An id as a cell: its leading hex digits in the compact layout (any unique prefix selects,
    as everywhere an id is asked for), whole in the wide one."""
    return ("-", "-") if not value else (value[:digits], value)
