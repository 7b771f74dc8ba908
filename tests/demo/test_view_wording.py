"""The demo's words: counts with their noun in the right number ("1 pause", "1 migration"), a
yes/no feature as yes or no (not Python's False), and a plan's hours with their day."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from metatune_cli.demo.view import _fmt, _hours, closing_summary


def result(pauses: int, migrations: int) -> dict[str, Any]:
    study = {"trials": 3, "grid": 72, "emissions_g": 0.02, "run_now_g": 0.08, "greedy_g": 0.03}
    return {
        "studies": [study],
        "pauses": pauses,
        "migrations": migrations,
        "early_stops": 1,
        "curve_stops": 1,
        "webhooks": {"deliveries": 1, "verified": 1},
        "elapsed_s": 490.0,
    }


def test_counts_take_their_nouns_number() -> None:
    one = closing_summary(result(1, 1))
    assert "1 pause, 1 migration through a checkpoint, 1 early stop (1 by" in one
    assert "1 webhook delivery, 1 signature-verified" in one
    assert "(s)" not in one
    assert "2 pauses, 0 migrations through" in closing_summary(result(2, 0))


def test_a_pair_feature_reads_yes_or_no() -> None:
    assert (_fmt(True, "{}"), _fmt(False, "{}"), _fmt(None, "{}")) == ("yes", "no", "-")


def test_planned_hours_name_their_day() -> None:
    def at(day: int, hour: int) -> datetime:
        return datetime(2023, 6, day, hour, tzinfo=UTC)

    assert _hours([("osl1", [at(13, 22)])]) == "osl1 13 Jun 22h (1 h)"
    assert _hours([("fra1", [at(14, 2), at(14, 3), at(14, 4)])]) == "fra1 14 Jun 02-04h (3 h)"
    assert _hours([("yyz1", [at(13, 23), at(14, 0)])]) == "yyz1 13 Jun 23h-14 Jun 00h (2 h)"
