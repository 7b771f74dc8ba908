"""`metatune webhooks list` as a pipe or a file gets it: the compact layout of the CLI's tables
(every line within 80 columns, no cell cut to '…', the next attempt to the second), `--wide` for
every column with each URL on one line; an empty outbox says so. Real PostgreSQL, the real CLI
process, stdout a pipe."""

from __future__ import annotations

import asyncio
import subprocess

from metatune_telemetry.webhooks.adapters.outbox import list_outbox
from tests.support.cli import fits, run

from .mlflow_study import cli_env, store
from .receiver import infeasible, study_events

HOOK = "https://hooks.example.com/metatune/studies/notifications"


async def test_the_outbox_fits_80_columns_and_wide_gives_every_column(
    db, schema, tsettings
) -> None:
    env = {k: v for k, v in cli_env(tsettings, schema).items() if k != "COLUMNS"}
    empty = await asyncio.to_thread(webhooks_list, env)
    assert empty.returncode == 0 and empty.stdout.strip() == "the outbox is empty", empty.stderr

    study, job, events = study_events(HOOK)
    await store(db, [*events, infeasible(job, study, 1)])
    rows = await list_outbox(db)
    assert rows and {r["state"] for r in rows} == {"pending"}

    shown = await asyncio.to_thread(webhooks_list, env)
    assert shown.returncode == 0, shown.stderr
    fits(shown.stdout)
    assert "tries" in shown.stdout and HOOK not in shown.stdout  # folded in its column
    for row in rows:
        assert row["event_type"] in shown.stdout
        assert f"{row['next_attempt_at']:%m-%d %H:%M:%S}" in shown.stdout
    every = await asyncio.to_thread(webhooks_list, env, "--wide")
    assert every.returncode == 0, every.stderr
    assert HOOK in every.stdout and "attempts" in every.stdout and "last" in every.stdout


def webhooks_list(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return run(["webhooks", "list", *extra], env)
