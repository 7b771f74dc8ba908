"""How every view (the demo, the CLI, the dashboard, the disclosure) shows what they share."""

from __future__ import annotations


def trial_label(trial_index: int | None) -> str:
    """A trial's number as people read it: ``#1`` is a study's first trial (``trial_index`` 0).
    JSON outputs keep the 0-based ``trial_index`` of the contracts."""
    return "#?" if trial_index is None else f"#{trial_index + 1}"
