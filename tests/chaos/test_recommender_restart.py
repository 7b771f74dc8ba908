"""kill -9 the recommender while it holds a study's first results (taken while its database is
away, so it cannot have decided anything on them), start it again: the study ends with exactly
its budget of trials requested, none twice, the continuations chosen by expected improvement,
and one stop.

The recommender runs as a process of its own (``python -m`` this module: the service as
``python -m metatune_recommender`` runs it, without the shipped seeds, whose prior takes minutes
to fit on a small machine) on a database of its own, pre-filled with a few of the seed's runs so
that it answers by the GP and expected improvement.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import nats
import psycopg
import pytest
from nats.js.errors import NotFoundError
from psycopg import sql

from metatune import subjects
from metatune.bus import ensure_streams
from metatune.contracts import (
    DatasetProfiled,
    FailureReason,
    JobRequested,
    RunCompleted,
    RunFailed,
    StopReason,
    StudyStopped,
)
from metatune.knowledge.files import read_kb_file
from metatune.knowledge.records import KbRun
from metatune.knowledge.store import KnowledgeStore
from metatune.settings import Settings
from metatune_recommender.adapters.flywheel import seed_path
from metatune_recommender.domain.study_loop import job_id_for
from tests.support.samples import FEATURES, NOW, SPEC, record_assignment
from tests.support.studies import acked_through, completion
from tests.support.waiting import wait_for

from .conftest import Child, RestartableNats, of, publish, spawn, stream_events

pytestmark = pytest.mark.chaos
BUDGET = 5  # three opening trials, two by expected improvement, then the budget's stop
NEXT_TRIAL = "recommender-next-trial"


@pytest.fixture
def database() -> Iterator[str]:
    """A PostgreSQL database of this test alone (the service uses its default schema), dropped after."""
    admin = Settings().database_url
    name = f"chaos_rec_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlsplit(admin)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def seed_subset(datasets: int = 2, runs: int = 8) -> list[KbRun]:
    """A few runs of the first seed's first datasets: a knowledge base the GP fits in seconds."""
    kept: dict[str, list[KbRun]] = {}
    for run in read_kb_file(seed_path()).runs:
        if run.dataset.name in kept or len(kept) < datasets:
            kept.setdefault(run.dataset.name, []).append(run)
    return [run for group in kept.values() for run in group[:runs]]


@pytest.fixture
async def knowledge(database: str) -> AsyncIterator[str]:
    store = KnowledgeStore(database)
    try:
        await store.migrate()
        await store.add_runs(seed_subset())
    finally:
        await store.close()
    yield database


async def test_a_killed_recommender_requests_the_budget_once_and_stops_once(
    chaos_nats: RestartableNats, knowledge: str, tmp_path: Path
) -> None:
    url = chaos_nats.url
    env = {
        "METATUNE_NATS_URL": url,
        "METATUNE_DATABASE_URL": knowledge,
        "METATUNE_DATA_DIR": str(tmp_path / "recommender"),
        "METATUNE_HEARTBEAT_S": "0.5",
        "METATUNE_ACK_WAIT_S": "10",  # what the killed process held comes back 10 s after
    }
    log = tmp_path / "recommender.log"
    study = uuid.uuid4()
    spec = SPEC.model_copy(update={"trials": BUDGET})
    stream = Settings().stream_name
    nc = await nats.connect(url)
    js = nc.jetstream()
    child: Child | None = None
    try:
        await ensure_streams(js, Settings(nats_url=url))
        child = spawn(__name__, env, log)
        profiled = DatasetProfiled(occurred_at=NOW, study_id=study, spec=spec, features=FEATURES)
        await publish(js, subjects.DATASETS_PROFILED, profiled)
        opening = await wait_for(
            lambda: _requested(url, study, 3), "the opening batch", timeout=240
        )
        for job in opening:  # each result comes from the datacenter its job is assigned to
            await record_assignment(js, job.job_id, "fra1")
        by_index = {job.trial_index: job for job in opening}
        # the database goes away: the two completions are taken and held (nothing can be decided
        # without the study's profile), and the process is killed with them in hand
        with refusing_connections(knowledge):
            seqs = {NEXT_TRIAL: 0}
            for index in (0, 1):
                seqs[NEXT_TRIAL] = await _publish_result(js, by_index[index])
            await wait_for(
                lambda: _delivered(js, stream, NEXT_TRIAL, seqs[NEXT_TRIAL]),
                "the completions taken",
                timeout=120,
            )
            child.kill9()
        before = _of_study(of(await stream_events(url), JobRequested), study)
        assert len(before) == 3  # nothing decided before the kill: the restart has it all to do

        child = spawn(__name__, env, log)
        # each completion frees a slot (three scores in, this small base's expected improvement
        # would end the study early, rightly: so the third result is a failure, and the budget
        # is the rule that ends it)
        await wait_for(lambda: _requested(url, study, BUDGET), "the next trials", timeout=240)
        seqs[f"{NEXT_TRIAL}-failed"] = await _publish_result(js, by_index[2])
        await wait_for(lambda: _stopped(url, study), "the study's stop", timeout=240)
        for durable, seq in seqs.items():  # nothing left that could request more
            await wait_for(
                partial(acked_through, js, stream, durable, seq),
                f"{durable} drained",
                timeout=120,
            )
        after = await stream_events(url)
    finally:
        if child is not None:
            child.kill9()
        await nc.close()

    requests = _of_study(of(after, JobRequested), study)
    assert len({r.job_id for r in requests}) == BUDGET  # exactly the budget
    assert len(requests) == BUDGET  # none twice on the stream
    assert sorted(r.trial_index for r in requests) == list(range(BUDGET))
    assert {r.job_id for r in requests} == {job_id_for(study, i) for i in range(BUDGET)}
    assert {r.acquisition for r in requests if r.trial_index >= 3} == {"expected-improvement"}
    stops = _of_study(of(after, StudyStopped), study)
    assert len(stops) == 1
    assert stops[0].reason is StopReason.budget and stops[0].trials_requested == BUDGET
    assert stops[0].trials_finished == 3 and stops[0].best_metric == pytest.approx(0.51)


@contextmanager
def refusing_connections(database_url: str) -> Iterator[None]:
    """The database refuses connections (its open ones are ended) until the block exits."""
    admin = Settings().database_url
    name = sql.Identifier(urlsplit(database_url).path.lstrip("/"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(name))
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (urlsplit(database_url).path.lstrip("/"),),
        )
    try:
        yield
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(name))


async def _publish_result(js, job: JobRequested) -> int:
    """Publish the job's result; its stream sequence."""
    subject, result = _result(job)
    ack = await js.publish(
        subject, result.to_bytes(), headers={"Nats-Msg-Id": str(result.event_id)}
    )
    return ack.seq


def _of_study(events: list, study: uuid.UUID) -> list:
    return [e for e in events if e.study_id == study]


async def _requested(url: str, study: uuid.UUID, n: int) -> list[JobRequested] | None:
    requests = _of_study(of(await stream_events(url), JobRequested), study)
    return requests if len(requests) >= n else None


async def _stopped(url: str, study: uuid.UUID) -> bool:
    return bool(_of_study(of(await stream_events(url), StudyStopped), study))


def _result(job: JobRequested) -> tuple[str, RunCompleted | RunFailed]:
    """Trials 0 and 1 complete (accuracy 0.5, 0.51), trial 2 fails."""
    if job.trial_index == 2:
        return subjects.runs_failed("fra1"), RunFailed(
            occurred_at=NOW,
            job_id=job.job_id,
            study_id=job.study_id,
            datacenter="fra1",
            reason=FailureReason.invalid_config,
            message="chaos",
        )
    return subjects.runs_completed("fra1"), completion(job, accuracy=0.5 + 0.01 * job.trial_index)


async def _delivered(js, stream: str, durable: str, seq: int) -> bool:
    """The consumer has handed the message at ``seq`` (or a later one) to the service."""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:  # not created yet
        return False
    return info.delivered.stream_seq >= seq


if __name__ == "__main__":  # the recommender, as its image runs it, without the shipped seeds
    from metatune_recommender.app import create_service

    create_service(load_seed_kb=False).run()
