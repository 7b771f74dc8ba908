"""Bad input gets one ``error:`` line and exit 2, never a traceback, and nothing is published or
uploaded: a deadline past the calendar's end or not in the future, a study file nested 100,000
deep, a study file naming a dataset outside its folder (unless the user allows it). The client
refuses the same deadlines with InvalidRequest. ``metatune events`` prints an event holding a lone
surrogate, rich markup or a terminal escape as text. Real NATS, the real CLI process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from metatune import subjects
from metatune.settings import Settings
from metatune_cli.client import AsyncClient, InvalidRequest
from tests.support.cli import run

from .recorded_study import one_error_line, stored

ROWS = '{"text": "hello", "label": "a"}\n{"text": "bye", "label": "b"}\n'


@pytest.mark.slow  # a CLI process per case
async def test_bad_submissions_are_one_line_exit_2_and_nothing_uploaded(
    submitter: tuple[dict[str, str], JetStreamContext], tmp_path: Path
) -> None:
    env, js = submitter
    studies, elsewhere = tmp_path / "studies", tmp_path / "elsewhere"
    studies.mkdir()
    elsewhere.mkdir()
    data = studies / "d.jsonl"
    data.write_text(ROWS)
    outside = elsewhere / "private.jsonl"
    outside.write_text(ROWS)
    (studies / "link.jsonl").symlink_to(outside)
    deep_yaml, deep_json = studies / "deep.yaml", studies / "deep.json"
    deep_yaml.write_text("dataset: d.jsonl\nname: " + "[" * 100_000 + "]" * 100_000 + "\n")
    deep_json.write_text('{"dataset": ' + "[" * 100_000 + "]" * 100_000 + "}\n")

    def study(body: str) -> str:
        path = studies / f"study-{len(list(studies.glob('study-*')))}.yaml"
        path.write_text(body)
        return str(path)

    cases = [
        (["submit", str(data), "--deadline", "99999999999d"], "'99999999999d' is too far ahead"),
        (["submit", str(data), "--deadline", "2020-01-01T00:00:00Z"], "is not in the future"),
        (["submit", study("dataset: d.jsonl\ndeadline: 0m\n")], "'0m' is not in the future"),
        (["submit", str(deep_yaml)], "deep.yaml: nested too deeply"),
        (["submit", str(deep_json)], "deep.json: nested too deeply"),
        (
            ["submit", study("dataset: ../../../../../../../../etc/passwd\n")],
            "dataset: ../../../../../../../../etc/passwd is outside the study file's folder",
        ),
        (["submit", study(f"dataset: {outside}\n")], "--allow-dataset-outside"),
        (["submit", study("dataset: ../elsewhere/private.jsonl\n")], "is outside"),
        (["submit", study("dataset: link.jsonl\n")], "link.jsonl is outside"),
    ]
    for args, words in cases:
        one_error_line(run(args, env), 2, words)
    assert await stored(js) == (0, 0)

    # the user's explicit choice (never the file's) reads a dataset elsewhere
    allowed = run(
        ["submit", study("dataset: ../elsewhere/private.jsonl\n"), "--allow-dataset-outside"], env
    )
    assert allowed.returncode == 0, allowed.stderr
    events, uploaded = await stored(js)
    assert events == 1 and uploaded > 0  # the submission, and the file's chunk and meta


async def test_the_client_refuses_the_same_deadlines(
    submitter: tuple[dict[str, str], JetStreamContext], private_nats: str, tmp_path: Path
) -> None:
    _, js = submitter
    data = tmp_path / "d.jsonl"
    data.write_text(ROWS)
    async with AsyncClient(Settings(nats_url=private_nats)) as client:
        with pytest.raises(InvalidRequest, match="too far ahead"):
            await client.submit(data, deadline="99999999999d")
        with pytest.raises(InvalidRequest, match="not in the future"):
            await client.submit(data, deadline="2001-01-01T00:00:00+00:00")
        study = tmp_path / "study.yaml"
        study.write_text("dataset: ../../../../etc/passwd\n")
        with pytest.raises(InvalidRequest, match="allow_dataset_outside=True"):
            await client.submit(study)
    assert await stored(js) == (0, 0)


async def test_events_prints_any_text_as_text(
    submitter: tuple[dict[str, str], JetStreamContext],
) -> None:
    env, js = submitter
    hostile = "lone \ud800 surrogate [/x] [bold]markup \x1b[2J escape"
    body = json.dumps({"occurred_at": "2026-12-01T00:00:00Z", "code": "x", "message": hostile})
    await js.publish(subjects.errors("probe"), body.encode())  # ASCII JSON: "\ud800" escaped
    printed = [
        run(args, {**env, "COLUMNS": "300"})
        for args in (["events", "--wide"], ["events", "--json"])
    ]
    assert [p.returncode for p in printed] == [0, 0], [p.stderr for p in printed]
    assert "lone \\ud800 surrogate [/x] [bold]markup \\x1b[2J escape" in printed[0].stdout
    assert json.loads(printed[1].stdout)["message"] == hostile
    assert all("\x1b" not in p.stdout for p in printed)
