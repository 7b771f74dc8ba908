"""The scale benchmark reads any carbon folder from any start and lists the zones it cannot use."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .conftest import load_bench, write_trace

bench = load_bench("scheduler_scale_bench")


def test_traces_from_a_chosen_start_list_what_they_skip(tmp_path: Path) -> None:
    write_trace(tmp_path, "AA", "2024-02-01", 24 * 20, 300, seed=1)
    write_trace(tmp_path, "BB", "2024-02-01", 24 * 20, 50, seed=2)
    write_trace(tmp_path, "CC", "2024-02-01", 24 * 9, 200, seed=3)  # ends before the two weeks do
    start = pd.Timestamp("2024-02-05", tz="UTC")
    found = bench.traces(tmp_path, start)
    assert found.zones == ["AA", "BB"] and found.ci.shape == (2, bench.HOURS)
    assert found.skipped == ["CC: 120 of the 336 h from 2024-02-05 00:00 in CC.csv.gz"]
    one_day_later = bench.traces(tmp_path, start + pd.Timedelta(days=1))
    assert (one_day_later.ci[:, :-24] == found.ci[:, 24:]).all()  # --start moves the window
    picked = bench.traces(tmp_path, start, ["BB", "ZZ"])
    assert picked.zones == ["BB"] and picked.skipped == [
        f"ZZ: no em_hourly/ZZ.csv.gz in {tmp_path}"
    ]


def test_more_datacenters_than_zones_share_them_in_order(tmp_path: Path) -> None:
    write_trace(tmp_path, "AA", "2024-02-01", 24 * 20, 300, seed=1)
    write_trace(tmp_path, "BB", "2024-02-01", 24 * 20, 50, seed=2)
    found = bench.traces(tmp_path, pd.Timestamp("2024-02-05", tz="UTC"))
    zones, ci = bench.datacenter_zones(found, 5)
    assert zones == ["AA", "BB", "AA", "BB", "AA"] and ci.shape == (5, bench.HOURS)
    assert (ci[2] == found.ci[0]).all() and (ci[3] == found.ci[1]).all()
