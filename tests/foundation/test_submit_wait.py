"""`metatune submit --wait` follows the study in the event log: it reports each change of state
once and ends, when every requested trial has ended after the stop, with the results; it gives up
past its limit with exit 4. Real NATS, the real CLI process; the platform's events are published
as the recommender and the agents would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from uuid import UUID

from nats.js import JetStreamContext

from metatune import subjects
from tests.support.cli import METATUNE, run

from .recorded_study import FAILED, TRAINED, publish, study_events, submission


async def test_submit_wait_ends_with_the_results_once_every_trial_has_ended(
    submitter: tuple[dict[str, str], JetStreamContext], private_nats: str, tmp_path: Path
) -> None:
    env, js = submitter
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello", "label": "a"}\n')
    waiting = await asyncio.create_subprocess_exec(
        *METATUNE,
        "submit",
        str(data),
        "--trials",
        "2",
        "--wait",
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        study = UUID((await submission(js, "the submission on the bus"))["study_id"])
        events = study_events(study)[1:]  # the platform's part: requests, the runs, the stop
        stop = [e for e in events if e[0] == subjects.STUDIES_STOPPED]
        before_stop = [e for e in events if e[0] != subjects.STUDIES_STOPPED]
        await publish(private_nats, before_stop)
        await asyncio.sleep(4)  # a poll sees the trials ended but no stop: it must keep waiting
        assert waiting.returncode is None
        await publish(private_nats, stop)
        out, err = await asyncio.wait_for(waiting.communicate(), timeout=120)
    finally:
        if waiting.returncode is None:
            waiting.kill()
    assert waiting.returncode == 0, err.decode()
    receipt = json.loads(out)
    assert receipt["study_id"] == str(study)
    assert receipt["status"] == "finished (budget), met its deadline"  # ended early (2026-03-01)
    assert {t["job_id"]: t["status"] for t in receipt["results"]} == {
        str(TRAINED): "early-stopped (plateau, step 113)",
        str(FAILED): "failed: out_of_memory",
    }
    lines = err.decode().strip().splitlines()
    assert len(lines) == len(set(lines))  # each state once
    assert "finished (budget)" in lines[-1]


def test_submit_wait_gives_up_past_its_limit(private_nats: str, env_for, tmp_path: Path) -> None:
    env = env_for(METATUNE_NATS_URL=private_nats, HF_HUB_OFFLINE="1")
    asyncio.run(publish(private_nats, []))  # the streams
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello", "label": "a"}\n')
    result = run(["submit", str(data), "--wait", "--wait-hours", "0"], env)
    assert result.returncode == 4, result.stderr
    study_id = str(UUID(result.stdout.splitlines()[0]))  # the id first, then the progress
    warning, line = result.stderr.strip().splitlines()
    assert warning.startswith("warning: validation skipped: ")  # no profiler runs here
    assert line.startswith("error: ") and "has not finished" in line
    assert f"metatune study show {study_id}" in line
