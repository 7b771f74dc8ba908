"""`study list`, `results` and `events` as a pipe or a file gets them: the compact layout, every
line within 80 columns and no cell cut to '…', names before ids, numbers with their units (mg, Wh,
never 0.000000), times without microseconds; `--wide` gives every column. Real NATS, the real CLI
process, stdout a pipe. (`webhooks list`: tests/telemetry/test_outbox_table.py; the `kb` tables:
tests/knowledge/test_stats.py.)"""

from __future__ import annotations

import subprocess
import threading
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from metatune import contracts as c
from metatune import subjects
from metatune.units import compute_hours, energy, mass, significant
from metatune_cli.asyncapi.examples import ACCOUNTING
from tests.support.cli import METATUNE, fits, run
from tests.support.samples import started
from tests.support.waiting import wait_for

from .recorded_study import STUDY, TRAINED, profiled, publish, study_events


@pytest.fixture
def narrow(module_nats: str, env_for) -> dict[str, str]:
    env = env_for(METATUNE_NATS_URL=module_nats)
    env.pop("COLUMNS", None)  # as a pipe without a terminal gets it: Rich's 80 columns
    return env


async def test_events_fit_80_columns_with_short_ids_and_wide_gives_them_whole(
    module_nats: str, narrow
) -> None:
    study, job = uuid4(), uuid4()
    at = datetime(2026, 3, 2, 9, 15, 7, 123456, tzinfo=UTC)
    failed = c.ErrorEvent(
        occurred_at=at,
        service="trainer-agent",
        kind=c.ErrorKind.bad_input,
        code="dataset_unreadable",
        message="the dataset's third shard could not be read: " + "truncated gzip stream " * 6,
        correlation_id=str(study),
    )
    await publish(
        module_nats,
        [started(job, study_id=study, at=at), (subjects.errors("trainer-agent"), failed)],
    )

    shown = run(["events", "--study", str(study)], narrow)
    assert shown.returncode == 0, shown.stderr
    fits(shown.stdout)
    assert "03-02 09:15:07" in shown.stdout and "2026-03-02" not in shown.stdout
    assert "assignments.fra1" in shown.stdout and "metatune.assign" not in shown.stdout
    assert f"job_id={str(job)[:8]}" in shown.stdout and str(job) not in shown.stdout
    assert shown.stdout.index("assignments.fra1") < shown.stdout.index("dataset_unreadable")

    every = run(["events", "--study", str(study), "--wide"], narrow)
    assert every.returncode == 0, every.stderr
    assert "2026-03-02 09:15:07" in every.stdout and ".123456" not in every.stdout
    assert subjects.assignments("fra1") in every.stdout and f"job_id={job}" in every.stdout
    assert len(every.stdout.splitlines()) == 3  # the header and one line an event, never wrapped


async def test_follow_prints_each_event_as_it_comes_lined_up_under_one_header(
    module_nats: str, narrow
) -> None:
    study, jobs = uuid4(), [uuid4(), uuid4()]
    await publish(module_nats, [started(jobs[0], study_id=study)])
    env = {k: v for k, v in narrow.items() if k != "PYTHONUNBUFFERED"}  # a pipe buffers
    command = [*METATUNE, "events", "--follow", "--study", str(study)]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as proc:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))
        reader.start()
        try:
            await wait_for(lambda: len(lines) >= 2, "the header and the first event", timeout=120)
            await publish(module_nats, [started(jobs[1], "osl1", study)])
            await wait_for(lambda: any("osl1" in line for line in lines), "the event that came")
        finally:
            proc.terminate()
            reader.join(30)
    header, *rows = lines
    assert header.split() == ["time", "subject", "event"]  # once: the second row has none
    first, second = [row for row in rows if not row.startswith(" ")]  # each row's first line
    assert first.index("assignments.fra1") == second.index("assignments.osl1")
    assert header.index("event") == first.index("study_id=") == second.index("study_id=")


async def test_compact_by_default_wide_on_request(module_nats: str, narrow) -> None:
    await publish(module_nats, [*study_events(), profiled()])
    listed = run(["study", "list"], narrow)
    assert listed.returncode == 0, listed.stderr
    fits(listed.stdout)
    [row] = [line for line in listed.stdout.splitlines() if str(STUDY)[:8] in line]
    assert row.index("-") < row.index(str(STUDY)[:8])  # the name (none here: '-') first
    assert "finished (budget)" in listed.stdout and str(STUDY) not in listed.stdout
    wide = run(["study", "list", "--wide"], narrow)
    assert wide.returncode == 0 and "all-MiniLM-L6-v2" in wide.stdout  # the model column

    results = run(["results", str(STUDY)], narrow)
    assert results.returncode == 0, results.stderr
    fits(results.stdout)
    # 38.5 Wh; realised: the observed hour at 20 g/kWh, the other at the forecast's
    assert "38.5 Wh" in results.stdout and " mg" in results.stdout
    assert str(TRAINED) not in results.stdout  # the job id is a wide column
    every = run(["results", str(STUDY), "--wide"], narrow)
    assert every.returncode == 0, every.stderr
    assert str(TRAINED) in every.stdout and "hours observed" in every.stdout
    assert mass(ACCOUNTING.emissions_g) in every.stdout  # as charged: 310 mg


def test_units_per_magnitude() -> None:
    assert [mass(g) for g in (0.0573, 12.07, 1500.0, 4e-7, 0.0)] == [
        "57.3 mg",
        "12.1 g",
        "1.50 kg",
        "400 ng",
        "0 g",
    ]
    assert mass(None) == "-" and mass(0.000012) == "12.0 µg"
    assert [energy(wh) for wh in (0.22, 38.5, 3200.0, 0.0)] == [
        "220 mWh",
        "38.5 Wh",
        "3.20 kWh",
        "0 Wh",
    ]
    assert compute_hours(0.05339, "cpu") == "0.0534 CPU-hours"
    assert compute_hours(1.2, "cuda") == "1.20 GPU-hours" and significant(0.012345) == "0.0123"
