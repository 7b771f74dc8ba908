"""`metatune submit` when the profiler cannot check the dataset before it is published (no profiler
runs, or one still downloading a dataset too large to check in time): the submission is published
unchecked, the user is told so in one line on stderr, and the ``--json`` receipt says so too.
Real NATS, the real CLI process."""

from __future__ import annotations

import json
from pathlib import Path

import nats

from metatune import subjects
from metatune.bus import ensure_streams
from metatune.settings import Settings
from metatune_cli.client.aio import VALIDATE_TIMEOUT_S
from tests.support.cli import run


async def submitted(js) -> int:
    info = await js.stream_info("METATUNE", subjects_filter=subjects.DATASETS_SUBMITTED)
    return sum((info.state.subjects or {}).values())


def one_warning(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("warning: validation skipped: "), stderr
    assert "published unchecked" in lines[0] and "the profiler checks it" in lines[0], stderr
    return lines[0]


async def test_an_unchecked_submission_is_published_and_said_so(
    private_nats: str, env_for, tmp_path: Path
) -> None:
    env = env_for(METATUNE_NATS_URL=private_nats, HF_HUB_OFFLINE="1")
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello", "label": "a"}\n')
    nc = await nats.connect(private_nats)
    js = nc.jetstream()
    await ensure_streams(js, Settings(nats_url=private_nats))
    try:
        # no profiler at all: the server says no one answers
        plain = run(["submit", str(data)], env)
        assert plain.returncode == 0, plain.stderr
        study_id = plain.stdout.strip()
        assert len(study_id) == 36  # stdout is the study id alone, for scripts
        line = one_warning(plain.stderr)
        assert f"no one answers on {subjects.DATASETS_VALIDATE}" in line
        assert f"metatune events --study {study_id} --kind errors" in line
        assert await submitted(js) == 1

        # a profiler that takes the request and does not answer in time (a large download)
        await nc.subscribe(subjects.DATASETS_VALIDATE, queue="profiler")
        await nc.flush()
        as_json = run(["submit", str(data), "--json"], env)
        assert as_json.returncode == 0, as_json.stderr
        receipt = json.loads(as_json.stdout)
        assert receipt["validation"] == "skipped"
        assert receipt["validation_note"] == one_warning(as_json.stderr).removeprefix("warning: ")
        assert f"within {VALIDATE_TIMEOUT_S:g} s" in receipt["validation_note"]
        assert await submitted(js) == 2
    finally:
        await nc.close()
