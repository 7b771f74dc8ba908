"""``metatune cancel --study`` (and the client's ``cancel_study``): the study's cancellation is
published first, then a JobCancelled per trial not ended; a study the recommender then stops as
cancelled reads ``cancelled``; bad input is one error line and publishes nothing. Real NATS."""

from __future__ import annotations

import json
from uuid import uuid4

import nats

from metatune import contracts as c
from metatune import subjects
from metatune.settings import Settings
from metatune_cli.client import AsyncClient
from tests.support.cli import run

from .recorded_study import FAILED, TRAINED, logged, one_error_line, publish, study_events


async def event_log(url: str) -> list[tuple[str, dict]]:
    """(subject, payload) of every message of the event log, oldest first."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    count = (await js.stream_info("METATUNE")).state.messages
    sub = await js.subscribe(subjects.EVERYTHING, stream="METATUNE", ordered_consumer=True)
    messages = [await sub.next_msg(timeout=10) for _ in range(count)]
    await nc.close()
    return [(m.subject, json.loads(m.data)) for m in messages]


async def test_cancel_study_publishes_the_study_cancellation_first_then_each_trial(
    private_nats: str, env_for
) -> None:
    study = uuid4()
    await publish(private_nats, study_events(study)[:3])  # submitted, two trials requested
    env = env_for(METATUNE_NATS_URL=private_nats)
    for args, code, *words in [
        (["cancel"], 2, "either JOB_ID or --study"),
        (["cancel", str(TRAINED), "--study", str(study)], 2, "not both"),
        (["cancel", "--study", "xyz!"], 2, "not a study id"),
        (["cancel", "--study", str(uuid4())], 1, "no study"),
    ]:
        one_error_line(run(args, env), code, *words)
    assert len(await event_log(private_nats)) == 3  # nothing published

    result = run(["cancel", "--study", str(study)[:8], "--reason", "not needed", "--json"], env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert (out["study_id"], out["reason"]) == (str(study), "not needed")
    assert {j["job_id"] for j in out["cancelled_jobs"]} == {str(TRAINED), str(FAILED)}

    published = (await event_log(private_nats))[3:]
    assert [s for s, _ in published] == [
        subjects.STUDIES_CANCELLED,
        subjects.JOBS_CANCELLED,
        subjects.JOBS_CANCELLED,
    ]
    cancelled = c.StudyCancelled.model_validate(published[0][1])
    assert (str(cancelled.event_id), cancelled.study_id, cancelled.reason) == (
        out["event_id"],
        study,
        "not needed",
    )
    jobs = await logged(private_nats, subjects.JOBS_CANCELLED)
    assert {p["event_id"] for p in jobs} == {j["event_id"] for j in out["cancelled_jobs"]}
    assert {p["study_id"] for p in jobs} == {str(study)}  # each trial's cancellation names it

    # the recommender stops the study as cancelled: every view reads so
    stop = c.StudyStopped(
        occurred_at=cancelled.occurred_at,
        study_id=study,
        reason=c.StopReason.cancelled,
        trials_requested=2,
        trials_finished=0,
    )
    await publish(private_nats, [(subjects.STUDIES_STOPPED, stop)])
    async with AsyncClient(Settings(nats_url=private_nats)) as client:
        detail = await client.study(study)
        assert detail.status == "cancelled"
        again = await client.cancel_study(study)  # a study's cancellation again: no trial left
    assert again.cancelled == [] and again.study_id == study
    text = run(["cancel", "--study", str(study)], env)
    assert text.returncode == 0, text.stderr
    assert f"study {study} cancelled" in text.stdout and "0 trials not ended" in text.stdout
