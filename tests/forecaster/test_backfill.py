"""Filling the observation store ahead of time: ``backfill`` (window by window, resumable) and
``metatune forecaster backfill|import-csv`` through the CLI's plugin entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import psycopg
import pytest
from typer.testing import CliRunner

from metatune.settings import get_settings
from metatune_cli.cli.main import app
from metatune_forecaster.adapters.live import LiveSource, backfill
from metatune_forecaster.adapters.store import ObservationStore
from metatune_forecaster.domain.providers import ProviderUnavailable, Signal

from .trace_source import TraceSource, cli_db, store, trace

__all__ = ["cli_db", "store"]

EXPORT = Path(__file__).parent / "data" / "DE_2023_hourly_excerpt.csv"
START = pd.Timestamp("2023-02-01", tz="UTC")
END = START + pd.Timedelta(days=30)


class FailsAfter(TraceSource):
    """Answers ``windows`` requests, then is down (a backfill cut short)."""

    def __init__(self, windows: int) -> None:
        super().__init__()
        self.windows = windows

    async def observed(self, zone, start, end):
        if len(self.asked) >= self.windows:
            raise ProviderUnavailable("test-provider: 503 Service Unavailable")
        return await super().observed(zone, start, end)


@pytest.mark.asyncio
async def test_backfill_resumes_where_it_stopped_and_skips_stored_hours(
    store: ObservationStore,
) -> None:
    seen: list[tuple[int, int]] = []
    cut = LiveSource(FailsAfter(2), "DE")
    with pytest.raises(ProviderUnavailable):
        await backfill(store, cut, START, END, lambda done, total: seen.append((done, total)))
    assert seen == [(0, 720), (168, 720), (336, 720)]  # two windows of a week stored
    kept = await store.observed("DE", Signal.average, START, END)
    assert len(kept) == 336

    source = TraceSource()
    report = await backfill(store, LiveSource(source, "DE"), START, END)
    assert (report.hours, report.stored_before, report.stored.new, report.lacking) == (
        720,
        336,
        384,
        0,
    )
    assert source.hours_asked() == 384  # only what was missing
    assert source.asked[0][0] == START + pd.Timedelta(hours=336)
    stored = await store.observed("DE", Signal.average, START, END)
    expected = trace("DE")[(trace("DE").index >= START) & (trace("DE").index < END)]
    assert stored.to_numpy() == pytest.approx(expected.to_numpy())

    again = await backfill(store, LiveSource(source, "DE"), START, END)
    assert (again.stored_before, again.stored.new, source.hours_asked()) == (720, 0, 384)


@pytest.mark.asyncio
async def test_hours_the_provider_lacks_are_reported(store: ObservationStore) -> None:
    late = TraceSource(available_from=START + pd.Timedelta(days=10))
    report = await backfill(store, LiveSource(late, "DE"), START, END)
    assert (report.stored.new, report.lacking, report.complete) == (480, 240, False)


def test_import_csv_reads_an_electricity_maps_export_once(cli_db: str, tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["forecaster", "import-csv", str(EXPORT), "--zone", "DE", "--json"])
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    assert (summary["hours"], summary["new"], summary["missing_hours"]) == (240, 240, 0)
    assert summary["first"] == "2023-03-24T00:00:00+00:00"

    again = runner.invoke(app, ["forecaster", "import-csv", str(EXPORT), "--zone", "DE", "--json"])
    assert (json.loads(again.stdout)["new"], json.loads(again.stdout)["unchanged"]) == (0, 240)

    with psycopg.connect(get_settings().database_url) as conn:
        rows = conn.execute(
            "SELECT source, signal, count(*), min(intensity) FROM intensity_observations "
            "GROUP BY 1, 2"
        ).fetchall()
    assert rows == [("electricity-maps-csv", "average", 240, pytest.approx(rows[0][3]))]
    assert rows[0][3] == pytest.approx(trace("DE")["2023-03-24":"2023-04-02"].min(), abs=0.01)

    wrong = runner.invoke(app, ["forecaster", "import-csv", str(EXPORT), "--zone", "FR"])
    assert wrong.exit_code == 2 and "holds zone DE, not FR" in wrong.output

    gappy = tmp_path / "gappy.csv"
    lines = EXPORT.read_text().splitlines()
    gappy.write_text("\n".join(lines[:10] + lines[12:]) + "\n")  # two hours missing
    result = runner.invoke(app, ["forecaster", "import-csv", str(gappy), "--zone", "DE"])
    assert result.exit_code == 0 and "2 hours missing in the file" in result.output

    broken = tmp_path / "broken.csv"
    broken.write_text(lines[0] + "\n" + lines[1].replace("174.37", "-3") + "\n")
    refused = runner.invoke(app, ["forecaster", "import-csv", str(broken), "--zone", "DE"])
    assert refused.exit_code == 2 and "not '-3' at 2023-03-24T00:00:00+00:00" in refused.output
    not_export = runner.invoke(
        app, ["forecaster", "import-csv", str(EXPORT.parent / "PROVENANCE.md"), "--zone", "DE"]
    )
    assert not_export.exit_code == 2 and "error:" in not_export.output


def test_backfill_command_fills_a_region_from_its_registry_source(cli_db: str) -> None:
    runner = CliRunner()
    args = [
        "forecaster",
        "backfill",
        "--region",
        "DE",
        "--from",
        "2025-05-01",
        "--to",
        "2025-05-03",
    ]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["source"], summary["hours"], summary["new"]) == ("replay", 48, 48)
    again = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert (again["stored_before"], again["new"]) == (48, 0)

    unknown = runner.invoke(
        app, ["forecaster", "backfill", "--region", "XX", "--from", "2025-05-01"]
    )
    assert unknown.exit_code == 2 and "not in the datacenter registry" in unknown.output
    backwards = runner.invoke(app, [*args[:4], "--from", "2025-05-03", "--to", "2025-05-01"])
    assert backwards.exit_code == 2 and "is not after" in backwards.output


def test_without_a_database_backfill_and_import_say_how_to_start_one(database_down: int) -> None:
    runner = CliRunner()
    for args in (
        ["forecaster", "backfill", "--region", "DE", "--from", "2025-05-01", "--to", "2025-05-02"],
        ["forecaster", "import-csv", str(EXPORT), "--zone", "DE"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 3, result.output  # unavailable, not a usage error
        (line,) = result.stderr.strip().splitlines()
        assert f"127.0.0.1:{database_down}" in line
        assert "`metatune up`" in line and "METATUNE_DATABASE_URL" in line


def test_the_module_help_says_what_it_runs_and_reads_and_starts_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "metatune_forecaster", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"METATUNE_NATS_URL": "nats://127.0.0.1:9", "PATH": os.environ["PATH"]},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m metatune_forecaster")
    assert "METATUNE_REGISTRY_PATH" in done.stdout and "metatune forecaster backfill" in done.stdout
    wrong = subprocess.run(
        [sys.executable, "-m", "metatune_forecaster", "--regions", "DE"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 2 and "unrecognized arguments" in wrong.stderr
