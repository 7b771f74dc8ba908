"""Tenants on a real nats-server with auth on: each team's credential writes its own datasets
bucket and no other's; the services and agents read every tenant's; the client submits into its
tenant's bucket, once per key; a study that claims another tenant finds no dataset of its own."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.errors import NoStreamResponseError

from metatune import subjects
from metatune.bus import ObjectStore
from metatune.bus.auth import agent_user
from metatune.bus.credentials import public_key
from metatune.bus.streams import ensure_bucket
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    DatasetLocation,
    DatasetSubmitted,
    DatasetValidation,
    DatasetValidationReply,
    JobCancelled,
    LoraConfig,
    RunCompleted,
    RunFailed,
)
from metatune.settings import Settings
from metatune.tenancy import datasets_bucket, submitter_user
from metatune_cli.client import AsyncClient, InvalidRequest
from metatune_cli.client.submission import draft, resolve
from metatune_profiler.app import create_service as create_profiler
from metatune_profiler.settings import ProfilerSettings
from metatune_scheduler.domain.state import JobStatus, SchedulerState
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import job_request
from tests.support.cli import run
from tests.support.secured_bus import SecuredBus, violation
from tests.support.waiting import wait_for

A, B = "team-a", "team-b"
FRA1 = agent_user("fra1")
REFUSED = (nats.errors.TimeoutError, NoStreamResponseError)  # the server answers no refused call
KEY = "studies/one/data.jsonl"


def rows_file(path: Path) -> Path:
    rows = [{"text": f"an example sentence number {i}", "label": str(i % 2)} for i in range(40)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


async def test_a_tenant_writes_its_own_bucket_and_no_other(secured: SecuredBus, admin) -> None:
    errors: list[Exception] = []
    async with secured.client(submitter_user(A), errors) as nc:
        js = nc.jetstream(timeout=2.0)
        await ensure_bucket(js, datasets_bucket(A), Settings())  # its first upload makes it
        await ObjectStore(js).put_bytes(datasets_bucket(A), KEY, b"genuine\n")
    assert not [e for e in errors if "violation" in str(e).lower()]
    for intruder in (submitter_user(B), submitter_user()):  # another team, the default one
        async with secured.client(intruder, errors) as nc:
            objects = ObjectStore(nc.jetstream(timeout=1.0))
            with pytest.raises(REFUSED):
                await objects.put_bytes(datasets_bucket(A), KEY, b"poisoned\n")
            with pytest.raises(REFUSED):
                await objects.delete(datasets_bucket(A), KEY)
            with pytest.raises(REFUSED):  # nor read it
                await objects.get_bytes(datasets_bucket(A), KEY)
        await wait_for(violation(errors, f"OBJ_{datasets_bucket(A)}"), timeout=5)
    for reader in ("profiler", FRA1):  # every tenant's datasets are read where they are used
        async with secured.client(reader) as nc:
            got = await ObjectStore(nc.jetstream(timeout=2.0)).get_bytes(datasets_bucket(A), KEY)
            assert got == b"genuine\n"


async def test_the_client_submits_into_its_tenant_s_bucket_once_per_key(
    secured: SecuredBus, admin, tmp_path: Path
) -> None:
    data = rows_file(tmp_path / "data.jsonl")
    settings = secured.settings(submitter_user(A), tenant=A)
    async with AsyncClient(settings) as client:
        once = draft(resolve(data, None, {"deadline": "2d"}), settings)
        receipt = await client.submit_draft(once)  # no profiler here: validation is skipped
        with pytest.raises(InvalidRequest, match="written once"):
            await client.submit_draft(once)  # the same key again: never over a stored dataset
    stored = ObjectStore(admin.jetstream())
    assert await stored.exists(datasets_bucket(A), receipt.dataset.ref)
    assert not await stored.exists(datasets_bucket(), receipt.dataset.ref)
    sub = await admin.jetstream().subscribe(
        subjects.datasets_submitted(A), stream="METATUNE", ordered_consumer=True
    )
    submitted = DatasetSubmitted.model_validate_json((await sub.next_msg(timeout=5)).data)
    assert submitted.spec.tenant == A and submitted.study_id == receipt.study_id


async def test_a_study_claiming_another_tenant_finds_no_dataset_of_its_own(
    secured: SecuredBus, admin, tmp_path: Path
) -> None:
    """B names A's key: B's client looks in B's own bucket, and the profiler, asked to check a
    study of B's that names it, looks in B's bucket too; the key is in A's alone."""
    data = rows_file(tmp_path / "data.jsonl")
    a_settings = secured.settings(submitter_user(A), tenant=A)
    async with AsyncClient(a_settings) as client:
        ours = draft(resolve(data, None, {"deadline": "2d"}), a_settings)
        receipt = await client.submit_draft(ours)
    claimed = DatasetValidation(
        spec=ours.spec.model_copy(update={"tenant": B, "dataset": receipt.dataset})
    )
    profiler = create_profiler(secured.settings("profiler", ProfilerSettings))
    b_settings = secured.settings(submitter_user(B), tenant=B)
    async with profiler.running(), AsyncClient(b_settings) as client:
        with pytest.raises(InvalidRequest, match="not in the object store"):
            await client.submit(object_key=receipt.dataset.ref, deadline="2d")
        async with secured.client(submitter_user(B)) as nc:
            reply = await nc.request(
                subjects.datasets_validate(B), claimed.model_dump_json().encode(), timeout=30
            )
            problems = DatasetValidationReply.model_validate_json(reply.data).problems
            assert problems and "not in the object store" in " ".join(problems)
            # asking about a study of A's, on B's own subject: refused before any bucket is read
            as_a = claimed.model_copy(
                update={"spec": claimed.spec.model_copy(update={"tenant": A})}
            )
            reply = await nc.request(
                subjects.datasets_validate(B), as_a.model_dump_json().encode(), timeout=30
            )
            (refusal,) = DatasetValidationReply.model_validate_json(reply.data).problems
            assert "published by tenant 'team-b' for tenant 'team-a'" in refusal


async def test_a_tenant_publishes_only_under_its_own_name(secured: SecuredBus, admin) -> None:
    errors: list[Exception] = []
    async with secured.client(submitter_user(B), errors) as nc:
        js = nc.jetstream(timeout=1.0)
        for subject in (
            subjects.datasets_submitted(A),
            subjects.jobs_cancelled(A),
            subjects.studies_cancelled(A),
        ):
            with pytest.raises(REFUSED):
                await js.publish(subject, b"{}")
        with pytest.raises(REFUSED):
            await nc.request(subjects.jobs_lookup(A), b"{}", timeout=1.0)
        await js.publish(subjects.jobs_cancelled(B), b"{}")  # its own: stored
    await wait_for(violation(errors, subjects.jobs_cancelled(A)), timeout=5)


def test_a_cancellation_by_another_tenant_stops_nothing_even_before_the_request() -> None:
    """The scheduler's state (live and replayed alike): B's cancellation of A's job, before or
    after its request, leaves it to run; A's own cancels it."""
    state = SchedulerState()
    request = job_request(DatasetLocation(kind="object", ref=KEY), max_steps=8)
    request = request.model_copy(update={"spec": request.spec.model_copy(update={"tenant": A})})

    def cancel(tenant: str) -> JobCancelled:
        return JobCancelled(
            occurred_at=request.occurred_at, job_id=request.job_id, tenant=tenant, reason="mine"
        )

    state.apply(cancel(B))  # before the request: kept, but it is not B's job
    state.apply(request)
    assert state.jobs[request.job_id].status is JobStatus.pending
    by_b = cancel(B)
    assert (
        state.cancel_refused(by_b)
        == f"job {request.job_id} is not tenant 'team-b''s: not cancelled"
    )
    state.apply(by_b)
    assert state.jobs[request.job_id].status is JobStatus.pending
    state.apply(cancel(A))
    assert state.jobs[request.job_id].status is JobStatus.cancelled


def test_secrets_adds_a_tenant_with_its_credential_and_dashboard_token(tmp_path: Path) -> None:
    secrets_dir = tmp_path / "secrets"
    env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")} | {
        "METATUNE_DATA_DIR": str(tmp_path / "data"),
        "METATUNE_NATS_SECRETS_DIR": str(secrets_dir),
    }
    added = run(["secrets", "--tenant", "team-x", "--json"], env)
    assert added.returncode == 0, added.stderr
    result = json.loads(added.stdout)
    assert result["tenants"] == ["team-x"] and "submitter.team-x.nk" in result["files"]
    seed, token = (
        secrets_dir / "submitter.team-x.nk",
        secrets_dir / "tenants/team-x/dashboard.token",
    )
    for path in (seed, token):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert public_key(seed) in (secrets_dir / "auth.conf").read_text()
    assert seed.read_text().strip() not in added.stdout + added.stderr  # names, never secrets
    again = json.loads(run(["secrets", "--json"], env).stdout)  # the tenant stays
    assert again["tenants"] == ["team-x"] and seed.read_text() and token.is_file()
    refused = run(["secrets", "--tenant", "Team X"], env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "--tenant: tenant 'Team X'" in refused.stderr


async def test_the_agent_trains_a_tenant_s_study_from_that_tenant_s_bucket_only(
    secured: SecuredBus, admin, tmp_path: Path
) -> None:
    """A's study trains on A's object; the same object named by a study of B's is not found
    (the agent looks in B's bucket), and that trial fails without a step."""
    outcomes: list[RunCompleted | RunFailed] = []

    async def record(msg: Msg) -> None:
        kind = RunCompleted if msg.subject.endswith(".completed") else RunFailed
        outcomes.append(kind.model_validate_json(msg.data))

    await admin.subscribe(subjects.runs_completed("fra1"), cb=record)
    await admin.subscribe(subjects.runs_failed("fra1"), cb=record)
    data = rows_file(tmp_path / "data.jsonl")
    settings = secured.settings(submitter_user(A), tenant=A)
    async with AsyncClient(settings) as client:
        ours = draft(resolve(data, None, {"deadline": "2d"}), settings)
        receipt = await client.submit_draft(ours)
    spec = ours.spec.model_copy(update={"tenant": A, "dataset": receipt.dataset})
    trials = {A: uuid4(), B: uuid4()}
    agent = create_agent("fra1", secured.settings(FRA1, AgentSettings, data_dir=tmp_path / "agent"))
    async with agent.running():
        for tenant, job in trials.items():
            start = Assignment(
                occurred_at=datetime.now(UTC),
                job_id=job,
                study_id=receipt.study_id,
                datacenter="fra1",
                action=AssignmentAction.start,
                plan_version=1,
                spec=spec.model_copy(update={"tenant": tenant}),
                config=LoraConfig(batch_size=8, max_seq_length=32, max_steps=2),
            )
            await admin.jetstream().publish(subjects.assignments("fra1"), start.to_bytes())
        await wait_for(lambda: len(outcomes) == 2, "both trials ended", timeout=180)
    by_job = {o.job_id: o for o in outcomes}
    assert isinstance(by_job[trials[A]], RunCompleted)
    refused = by_job[trials[B]]
    assert isinstance(refused, RunFailed) and "not in the object store" in refused.message
    assert datasets_bucket(B) in refused.message
