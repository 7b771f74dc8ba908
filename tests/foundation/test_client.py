"""`metatune_cli.client` from Python: submit, list and show, follow a study to its end, results,
cancel a job or a whole study, and each failure as its MetaTuneError. Real NATS; the platform's
events are published as the recommender and the agents would (as the CLI's own tests do)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from nats.js import JetStreamContext

from metatune import subjects
from metatune.bus import DATASETS_BUCKET, headers_for
from metatune.settings import Settings
from metatune_cli.asyncapi.examples import SPEC
from metatune_cli.client import (
    AsyncClient,
    BusUnavailable,
    Client,
    InvalidRequest,
    NotFound,
    Progress,
    StillRunning,
)
from tests.support.secured_bus import SecuredBus, admin, secured  # noqa: F401 (fixtures)
from tests.support.servers import free_port
from tests.support.waiting import wait_for

from .recorded_study import FAILED, TRAINED, logged, publish, study_events, submission

REPO = Path(__file__).resolve().parents[2]


def dataset(tmp_path: Path) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello", "label": "a"}\n')
    return data


async def test_submit_list_show_follow_and_results(private_nats: str, tmp_path: Path) -> None:
    settings = Settings(nats_url=private_nats)
    await publish(private_nats, [])  # the streams
    data = dataset(tmp_path)
    updates: list[Progress] = []
    async with AsyncClient(settings, poll_s=0.1) as client:
        receipt = await client.submit(data, trials=2, tags=["nlp"], name="greetings")
        [event] = await logged(private_nats, subjects.DATASETS_SUBMITTED)
        assert (event["event_id"], event["study_id"]) == (
            str(receipt.event_id),
            str(receipt.study_id),
        )
        assert receipt.dataset.ref == f"studies/{receipt.study_id}/d.jsonl"
        assert receipt.dataset.sha256 == hashlib.sha256(data.read_bytes()).hexdigest()
        assert event["spec"]["trials"] == 2 and event["spec"]["base_model"] == "all-MiniLM-L6-v2"

        [summary] = await client.studies(tags=["nlp"])
        assert (summary.study_id, summary.name, summary.status) == (
            receipt.study_id,
            "greetings",
            "submitted",
        )
        assert await client.studies(tags=["nlp", "other"]) == []

        following = asyncio.create_task(client.wait(receipt.study_id, on_progress=updates.append))
        await wait_for(lambda: updates, "the first progress update")
        platform = study_events(receipt.study_id)[1:]  # requests, runs, a forecast, the stop
        await publish(private_nats, [e for e in platform if e[0] != subjects.STUDIES_STOPPED])
        await wait_for(
            lambda: any("1/2 trials completed" in u.line for u in updates), "the trials' ends"
        )
        assert not following.done()  # every trial ended, but the recommender has not stopped
        await publish(private_nats, [e for e in platform if e[0] == subjects.STUDIES_STOPPED])
        detail = await asyncio.wait_for(following, timeout=60)

        assert detail.status == "finished (budget), met its deadline" and detail.stopped is not None
        lines = [u.line for u in updates]
        assert lines[0] == "greetings: submitted, 0/2 trials completed" and len(lines) == len(
            set(lines)
        )
        assert updates[-1].finished and not any(u.finished for u in updates[:-1])
        assert "1 of them early-stopped, 1 failed" in lines[-1]
        assert [(t.job_id, t.status) for t in detail.trials] == [
            (TRAINED, "early-stopped (plateau, step 113)"),
            (FAILED, "failed: out_of_memory"),
        ]
        by_prefix = await client.study(str(receipt.study_id)[:8])
        assert by_prefix == detail

        trained, failed = await client.results(receipt.study_id)
        assert trained.job_id == TRAINED and trained.metrics is not None
        assert trained.metrics.accuracy == 0.91 and trained.majority_baseline == 0.6
        assert (trained.realised_hours, trained.forecast_priced_hours) == (1, 1)
        assert trained.realised_emissions_g is not None and trained.emissions_g is not None
        assert (
            trained.realised_emissions_g != trained.emissions_g
        )  # an hour re-priced at OBSERVED_G
        assert failed.error == "OOM at batch 16" and failed.metrics is None


def test_the_blocking_client_cancels_a_study_and_iterates_its_progress(
    private_nats: str,
) -> None:
    study = uuid4()
    asyncio.run(publish(private_nats, study_events(study)[:3]))  # submitted, two trials requested
    with Client(Settings(nats_url=private_nats), poll_s=0.1) as client:
        first = next(iter(client.progress(study)))
        assert first.status == "requesting trials" and not first.finished
        done = client.cancel_study(str(study)[:8], reason="not needed")
        assert done.study_id == study
        assert {c.job_id for c in done.cancelled} == {TRAINED, FAILED}
        cancelled = asyncio.run(logged(private_nats, subjects.JOBS_CANCELLED))
        assert {(p["job_id"], p["reason"]) for p in cancelled} == {
            (str(TRAINED), "not needed"),
            (str(FAILED), "not needed"),
        }
        assert {p["event_id"] for p in cancelled} == {str(c.event_id) for c in done.cancelled}
        assert [t.status for t in client.study(study).trials] == ["cancelled", "cancelled"]
        assert client.cancel_study(study).cancelled == []  # nothing left to cancel
        again = client.cancel(TRAINED)  # a single job, by id
        assert again.job_id == TRAINED and again.check_skipped is None

        # no stop yet: the study never finishes, and a wait (by a prefix) gives up (it goes on)
        seen: list[str] = []
        with pytest.raises(StillRunning, match=f"study {study} has not finished"):
            client.wait(str(study)[:8], timeout_s=0.3, on_progress=lambda u: seen.append(u.line))
        assert seen == [f"{study}: requesting trials, 0/{SPEC.trials} trials completed"]


def test_each_failure_is_its_own_error(private_nats: str, tmp_path: Path) -> None:
    down = Settings(nats_url=f"nats://127.0.0.1:{free_port()}", connect_timeout_s=1.0)
    with Client(down) as client:
        with pytest.raises(BusUnavailable, match="NATS is not reachable"):
            client.studies()
        with pytest.raises(BusUnavailable):
            client.submit(dataset(tmp_path))

    asyncio.run(publish(private_nats, []))
    with Client(Settings(nats_url=private_nats)) as client:
        with pytest.raises(NotFound, match=r"no study .* in the event log"):
            client.study(uuid4())
        with pytest.raises(NotFound, match="no study with an id starting '0000'"):
            client.results("0000")
        with pytest.raises(InvalidRequest, match="'not-a-study' is not a study id"):
            client.study("not-a-study")
        with pytest.raises(NotFound, match="no job"):
            client.cancel(uuid4())
        with pytest.raises(InvalidRequest, match="'12345' is not a job id"):
            client.cancel("12345")
        with pytest.raises(NotFound, match="no job"):
            client.download_adapter(uuid4(), tmp_path / "adapter")
        refused = [
            ({"home_datacenter": "xyz9"}, "unknown datacenter 'xyz9'"),
            (
                {"region_group": "EU", "home_datacenter": "dfw1"},
                "home_datacenter dfw1 is outside region_group EU",
            ),
            ({"deadline": "tomorrow"}, "'tomorrow'"),
            ({"trials": 0}, "invalid submission: trials"),
            ({"colour": "blue"}, "unknown submission option"),
        ]
        for options, words in refused:
            with pytest.raises(InvalidRequest, match=words):
                client.submit(dataset(tmp_path), **options)
        with pytest.raises(InvalidRequest, match=r"object_key: .*not in the object store"):
            client.submit(object_key="studies/none/d.jsonl")
        with pytest.raises(InvalidRequest, match="is not a readable file"):
            client.submit(tmp_path / "missing.jsonl")
    assert asyncio.run(logged(private_nats, subjects.DATASETS_SUBMITTED)) == []  # nothing published


async def test_an_external_submitter_s_credentials_suffice(
    secured: SecuredBus,  # noqa: F811
    admin,  # noqa: F811
    tmp_path: Path,
) -> None:
    """As the submitter alone (its nkey, no admin): submit a file, submit by object key, cancel
    (unchecked: it may not read the log, and says so)."""
    settings = secured.settings("submitter")
    async with AsyncClient(settings) as client:
        first = await client.submit(dataset(tmp_path), trials=1)
        second = await client.submit(object_key=first.dataset.ref, name="again")
        assert second.dataset.sha256 == first.dataset.sha256
        js = admin.jetstream()
        [(subject, requested)] = study_events(first.study_id)[1:2]  # the recommender's request
        await js.publish(subject, requested.to_bytes(), headers=headers_for(requested))
        cancelled = await client.cancel(TRAINED)
        assert cancelled.check_skipped is not None
    assert (await js.stream_info(f"OBJ_{DATASETS_BUCKET}")).state.messages > 0
    last = json.loads((await js.get_last_msg("METATUNE", subjects.JOBS_CANCELLED)).data)
    assert last["job_id"] == str(TRAINED) and last["event_id"] == str(cancelled.event_id)
    last = json.loads((await js.get_last_msg("METATUNE", subjects.DATASETS_SUBMITTED)).data)
    assert (last["study_id"], last["spec"]["name"]) == (str(second.study_id), "again")


async def test_the_example_submits_follows_and_prints_the_results(
    submitter: tuple[dict[str, str], JetStreamContext], private_nats: str
) -> None:
    """examples/client.py against a platform whose part is published here."""
    env, js = submitter
    example = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPO / "examples" / "client.py"),
        "--trials",
        "2",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        event = await submission(js, "the example's submission")
        assert event["spec"]["name"] == "snips-intents" and event["spec"]["trials"] == 2
        await publish(private_nats, study_events(UUID(event["study_id"]))[1:])
        out, err = await asyncio.wait_for(example.communicate(), timeout=120)
    finally:
        if example.returncode is None:
            example.kill()
    assert example.returncode == 0, err.decode()
    text = out.decode()
    assert f"study {event['study_id']}" in text and "snips-intents: finished (budget)" in text
    assert "early-stopped (plateau, step 113), accuracy 0.91" in text
    assert "failed: out_of_memory" in text
