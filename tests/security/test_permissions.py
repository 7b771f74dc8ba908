"""Least privilege on a real nats-server with auth on: foreign publishes, subscribes and object-store
reads are refused by the server; what each user needs works."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from uuid import uuid4

import nats
import pytest
from nats.errors import NoRespondersError

from metatune import subjects
from metatune.bus import ADAPTERS_BUCKET, CHECKPOINTS_BUCKET, DATASETS_BUCKET, ObjectStore
from metatune.bus.auth import principals
from metatune.contracts import AgentStatus
from metatune.redaction import redact
from metatune.registry import default_registry
from metatune.service import Service
from metatune_cli.asyncapi import document
from metatune_cli.asyncapi.requests import REQUESTS
from tests.support.secured_bus import FRA1, REFUSED, SecuredBus, violation
from tests.support.waiting import wait_for


async def test_a_client_without_credentials_is_refused(secured: SecuredBus) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            secured.address, allow_reconnect=False, max_reconnect_attempts=1, connect_timeout=2
        )


@pytest.mark.parametrize("user", [FRA1, "submitter", "profiler"])
async def test_foreign_publish_of_an_assignment_is_refused(
    secured: SecuredBus, admin, user: str
) -> None:
    errors: list[Exception] = []
    async with secured.client(user, errors) as nc:
        with pytest.raises(REFUSED):
            await nc.jetstream(timeout=1.0).publish(subjects.assignments("sjc1"), b"{}")
        await wait_for(violation(errors, f'publish to "{subjects.assignments("sjc1")}"'), timeout=5)
    info = await admin.jetstream().stream_info(
        "METATUNE", subjects_filter=subjects.assignments("sjc1")
    )
    assert not info.state.subjects  # nothing reached the log


async def test_an_agent_cannot_read_another_datacenters_assignments(
    secured: SecuredBus, admin
) -> None:
    errors: list[Exception] = []
    async with secured.client(FRA1, errors) as nc:
        await nc.subscribe(subjects.assignments("osl1"))  # plain subscribe
        await wait_for(
            violation(errors, f'subscription to "{subjects.assignments("osl1")}"'), timeout=5
        )
        js = nc.jetstream(timeout=1.0)
        with pytest.raises(REFUSED):  # its own durable, re-pointed at osl1
            await js.pull_subscribe(
                subjects.assignments("osl1"),
                durable="trainer-agent-fra1",
                stream="METATUNE",
                inbox_prefix=nc._inbox_prefix + b".",
            )
        await admin.jetstream().pull_subscribe(
            subjects.assignments("osl1"), durable="trainer-agent-osl1", stream="METATUNE"
        )
        await admin.jetstream().publish(
            subjects.assignments("osl1"), b"{}"
        )  # something a fetch would get
        bound = await js.pull_subscribe_bind(
            "trainer-agent-osl1", stream="METATUNE", inbox_prefix=nc._inbox_prefix + b"."
        )
        with pytest.raises(REFUSED):  # osl1's own durable
            await bound.fetch(1, timeout=1.0)
        await wait_for(
            violation(errors, "$JS.API.CONSUMER.MSG.NEXT.METATUNE.trainer-agent-osl1"), timeout=5
        )
        with pytest.raises(REFUSED):  # an ephemeral consumer over the whole log
            await js.subscribe(subjects.EVERYTHING, stream="METATUNE", ordered_consumer=True)


async def test_object_store_reads_outside_the_grants_are_refused(
    secured: SecuredBus, admin
) -> None:
    objects = ObjectStore(admin.jetstream())
    await objects.put_bytes(CHECKPOINTS_BUCKET, "job-1", b"weights")
    await objects.put_bytes(ADAPTERS_BUCKET, "job-1", b"adapter")
    errors: list[Exception] = []
    async with secured.client("submitter", errors) as nc:
        with pytest.raises(REFUSED):
            await ObjectStore(nc.jetstream(timeout=1.0)).get_bytes(CHECKPOINTS_BUCKET, "job-1")
        await wait_for(violation(errors, "OBJ_checkpoints"), timeout=5)
    async with secured.client(FRA1, errors) as nc:  # writes adapters, never reads them
        with pytest.raises(REFUSED):
            await ObjectStore(nc.jetstream(timeout=1.0)).get_bytes(ADAPTERS_BUCKET, "job-1")
        await wait_for(violation(errors, "$JS.API.CONSUMER.CREATE.OBJ_adapters"), timeout=5)


async def test_the_allowed_paths_work(secured: SecuredBus, admin, tmp_path) -> None:
    """The submitter uploads, looks an upload up and submits; the agent runtime (as trainer-agent.fra1) consumes its
    assignment, reads the dataset, writes and reads a checkpoint, writes an adapter, heartbeats."""
    errors: list[Exception] = []
    async with secured.client("submitter", errors) as nc:
        js = nc.jetstream(timeout=2.0)
        await ObjectStore(js).put_bytes(
            DATASETS_BUCKET, "studies/s1/data.jsonl", b'{"text": "hi", "label": 1}\n'
        )
        # a study file naming a dataset already uploaded: the submitter looks it up by its key
        assert (await ObjectStore(js).stat(DATASETS_BUCKET, "studies/s1/data.jsonl"))[0] == 27
        await js.publish(subjects.DATASETS_SUBMITTED, b"{}", headers={"Nats-Msg-Id": str(uuid4())})
        await js.publish(subjects.JOBS_CANCELLED, b"{}", headers={"Nats-Msg-Id": str(uuid4())})

    received: list[dict] = []
    service = Service(
        "trainer-agent", instance=FRA1, settings=secured.settings(FRA1, heartbeat_s=0.5)
    )

    @service.consume(subjects.assignments("fra1"), durable="trainer-agent-fra1")
    async def on_assignment(message: dict) -> None:
        received.append(message)

    async with service.running():
        await admin.jetstream().publish(subjects.assignments("fra1"), b'{"job": 1}')
        await wait_for(lambda: received == [{"job": 1}], timeout=20)
        objects = service.objects
        assert await objects.get_bytes(DATASETS_BUCKET, "studies/s1/data.jsonl")
        await objects.put_bytes(CHECKPOINTS_BUCKET, "job-2", b"x" * 300_000)  # several chunks
        await objects.put_bytes(
            CHECKPOINTS_BUCKET, "job-2", b"y" * 300_000
        )  # replace: old chunks purged
        assert await objects.get_bytes(CHECKPOINTS_BUCKET, "job-2") == b"y" * 300_000
        await objects.put_bytes(ADAPTERS_BUCKET, "job-2", b"adapter")
        await service.publish(subjects.agent_status("fra1"), _status())
        kv = await admin.jetstream().key_value("metatune_health")
        assert (await kv.get(FRA1)).value  # the first heartbeat is written at start-up
    assert not [e for e in errors if "violation" in str(e).lower()]


async def test_the_submitter_asks_and_hears_back_but_still_reads_no_log(
    secured: SecuredBus, admin
) -> None:
    """The scheduler and the profiler answer their requests (queue subscriptions, one reply to the
    requester's inbox); the submitter asks both and hears back, and still reads nothing else."""
    errors: list[Exception] = []
    async with (
        secured.client("scheduler", errors) as scheduler,
        secured.client("profiler", errors) as profiler,
        secured.client("submitter", errors) as nc,
    ):
        for responder, subject in (
            (scheduler, subjects.JOBS_LOOKUP),
            (profiler, subjects.DATASETS_VALIDATE),
        ):

            async def answer(msg, subject: str = subject) -> None:
                await msg.respond(f"answer to {subject}".encode())

            await responder.subscribe(subject, queue="responders", cb=answer)
            await responder.flush()  # the server has the subscription before the request comes
        for subject in (subjects.JOBS_LOOKUP, subjects.DATASETS_VALIDATE):
            reply = await nc.request(subject, b"{}", timeout=5)
            assert reply.data == f"answer to {subject}".encode()
        assert not errors
        with pytest.raises(REFUSED):  # the event log: no consumer of any subject
            await nc.jetstream(timeout=1.0).subscribe(
                subjects.JOBS_REQUESTED, stream="METATUNE", ordered_consumer=True
            )
        await nc.subscribe(subjects.errors("profiler"))  # nor a plain subscription
        await wait_for(
            violation(errors, f'subscription to "{subjects.errors("profiler")}"'), timeout=5
        )
    errors.clear()
    async with secured.client(FRA1, errors) as agent:  # no one else may answer in their place
        await agent.subscribe(subjects.JOBS_LOOKUP)
        await wait_for(violation(errors, f'subscription to "{subjects.JOBS_LOOKUP}"'), timeout=5)


def test_the_documented_requests_are_what_the_users_are_granted() -> None:
    users = {p.name: p.permissions for p in principals(default_registry())}
    operations = document()["operations"]
    for rc in REQUESTS:
        for requester in rc.requesters:
            assert operations[f"{requester}-request-{rc.id}"]["reply"]
            perms = users[requester]
            if perms is None:  # the admin: everything (its tools, the demo)
                continue
            asked = rc.subject.replace("{tenant}", "default")  # the default tenant's submitter
            assert asked in perms.publish
            assert asked not in perms.subscribe
        granted = users[rc.responder]
        assert operations[f"{rc.responder}-reply-{rc.id}"]["action"] == "receive"
        answered = rc.subject.replace("{tenant}", "*")  # every tenant's requests
        assert answered in granted.subscribe and granted.responses
    assert [n for n, p in users.items() if p is not None and p.responses] == [
        "profiler",
        "recommender",
        "scheduler",
    ]
    # only the admin asks the knowledge base: no other user may publish the request
    asking = [
        n
        for n, p in users.items()
        if p is None or any(s in p.publish for s in (subjects.KNOWLEDGE_RUNS, "metatune.>", ">"))
    ]
    assert asking == ["admin"]


async def test_the_recommender_alone_answers_the_knowledge_base_count(
    secured: SecuredBus, admin
) -> None:
    """The recommender may answer on metatune.requests.knowledge.runs and the admin hears back;
    the submitter may not ask, and no one else may answer in the recommender's place."""
    errors: list[Exception] = []
    async with secured.client("recommender", errors) as recommender:

        async def answer(msg) -> None:
            await msg.respond(b"counted")

        await recommender.subscribe(subjects.KNOWLEDGE_RUNS, queue="recommender", cb=answer)
        await recommender.flush()

        async def answered() -> bytes | None:
            # once in a clean-clone CI the first request found no responder right after the
            # subscription's flush (cause not found); a refused subscription never answers
            try:
                return (await admin.request(subjects.KNOWLEDGE_RUNS, b"{}", timeout=5)).data
            except NoRespondersError:
                return None

        assert await wait_for(answered, "the recommender's answer", timeout=20) == b"counted"
        assert not errors
    for user in ("submitter", "scheduler"):
        errors.clear()
        async with secured.client(user, errors) as nc:
            await nc.publish(subjects.KNOWLEDGE_RUNS, b"{}")
            await wait_for(violation(errors, f'publish to "{subjects.KNOWLEDGE_RUNS}"'), timeout=5)
    errors.clear()
    async with secured.client(FRA1, errors) as agent:
        await agent.subscribe(subjects.KNOWLEDGE_RUNS)
        await wait_for(violation(errors, f'subscription to "{subjects.KNOWLEDGE_RUNS}"'), timeout=5)


def _status() -> AgentStatus:
    return AgentStatus(
        occurred_at=datetime.now(UTC),
        datacenter="fra1",
        region="DE",
        gpus_total=1,
        gpus_free=1,
        gpu_model="cpu",
        power_per_gpu_w=100.0,
        pue=1.2,
    )


def test_secret_files_are_private_and_the_server_config_holds_no_secret(
    secured: SecuredBus,
) -> None:
    directory = secured.secrets.directory
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = list(directory.iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    config = secured.secrets.server_config.read_text()
    assert secured.secrets.admin_password() not in config
    for seed_file in directory.glob("*.nk"):
        seed = seed_file.read_text().strip()
        assert seed.startswith("SU") and seed not in config
        assert seed not in redact(f"seed={seed} in a log line")


def test_no_user_but_the_admin_may_use_the_whole_jetstream_api() -> None:
    for principal in principals(default_registry()):
        if principal.role == "admin":
            assert principal.permissions is None
            continue
        grants = principal.permissions.publish + principal.permissions.subscribe
        assert not {"$JS.API.>", ">", "metatune.>", "_INBOX.>", "$JS.>"} & set(grants), (
            principal.name
        )
        if principal.role == "agent":
            dc = principal.name.split(".")[1]
            assert [s for s in grants if s.startswith("metatune.assignments")] == []
            assert any(s.endswith(f".metatune.assignments.{dc}") for s in grants)
