"""A webhook URL's credentials (user info, a query token) never travel on the bus: the submission
carries the URL without them and the whole URL sealed for telemetry's key; telemetry alone opens
it, stores it and delivers with the credentials. No message in the stream and no log line of
the service carries them. Real NATS, real PostgreSQL, the real telemetry service."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import nats
import pytest

from metatune import contracts as c
from metatune import subjects
from metatune.webhook_seal import ensure_keypair, key_file, seal_for_telemetry
from metatune_telemetry.app import create_service
from metatune_telemetry.webhooks.adapters.outbox import list_outbox
from tests.support.builders import requested, submitted
from tests.support.cli import run
from tests.support.samples import CONFIG, NOW, SPEC
from tests.support.waiting import wait_for

from .conftest import publish_ready
from .receiver import SECRET, Receiver

PASSWORD, TOKEN = "hook-pw-8Kq2", "tok-Zr55-only-telemetry"


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def submission(url: str, key_settings) -> list[tuple[str, c.Event]]:
    public, sealed = seal_for_telemetry(url, key_settings)
    spec = SPEC.model_validate(
        {**SPEC.model_dump(), "webhook_url": public, "webhook_sealed": sealed}
    )
    study, job = uuid4(), uuid4()
    return [
        (subjects.DATASETS_SUBMITTED, submitted(study, spec)),
        (subjects.JOBS_REQUESTED, requested(job, study, spec=spec)),
        (
            subjects.assignments("fra1"),
            c.Assignment(
                occurred_at=NOW,
                job_id=job,
                study_id=study,
                datacenter="fra1",
                action=c.AssignmentAction.start,
                plan_version=1,
                spec=spec,
                config=CONFIG,
            ),
        ),
    ]


async def stream_bytes(url: str, stream: str) -> list[bytes]:
    """Every message of ``stream``, subject and payload, as stored."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        last = (await js.stream_info(stream)).state.last_seq
        out = []
        for seq in range(1, last + 1):
            msg = await js.get_msg(stream, seq)
            out.append((msg.subject or "").encode() + b" " + (msg.data or b""))
        return out
    finally:
        await nc.close()


async def test_credentials_leave_sealed_and_only_telemetry_delivers_with_them(
    tsettings, schema, js, receiver, tmp_path: Path, caplog
) -> None:
    settings = tsettings.model_copy(
        update={
            "webhook_secret": SECRET,
            "webhook_key_file": tmp_path / "telemetry" / "webhook.key",
        }
    )
    ensure_keypair(key_file(settings))
    host = receiver.base.removeprefix("http://")
    url = f"http://hooks:{PASSWORD}@{host}/hook?token={TOKEN}"
    events = submission(url, settings)
    # sealed for another telemetry's key: delivered without credentials, a warning, no failure
    other = settings.model_copy(update={"webhook_key_file": tmp_path / "other" / "webhook.key"})
    ensure_keypair(key_file(other))
    stray = submission(f"http://hooks:{PASSWORD}@{host}/stray?token={TOKEN}", other)
    caplog.set_level(logging.DEBUG)
    service = create_service(settings, schema=schema)
    async with service.running():
        await publish_ready(service, js, events + stray)

        async def delivered() -> list[dict]:
            rows = await list_outbox(service.runtime.db)
            return rows if sum(r["state"] == "delivered" for r in rows) == 2 else []

        await wait_for(delivered, "both job.requested notifications delivered")
    paths = {p: headers for p, headers, _ in receiver.received}
    # telemetry opened the seal: the receiver got the query token and the user info (Basic auth)
    assert set(paths) == {f"/hook?token={TOKEN}", "/stray"}
    basic = base64.b64encode(f"hooks:{PASSWORD}".encode()).decode()
    auth = {k.lower(): v for k, v in paths[f"/hook?token={TOKEN}"].items()}["authorization"]
    assert auth == f"Basic {basic}"
    assert "authorization" not in {k.lower() for k in paths["/stray"]}
    # nothing on the bus or in the logs carries a credential
    for message in await stream_bytes(settings.nats_url, settings.stream_name):
        assert PASSWORD.encode() not in message and TOKEN.encode() not in message
    assert any("does not open with this telemetry's key" in r.getMessage() for r in caplog.records)
    for record in caplog.records:
        line = record.getMessage()
        assert PASSWORD not in line and TOKEN not in line


def test_the_container_and_the_cli_print_the_same_public_key(tmp_path: Path) -> None:
    """Telemetry's image has no ``metatune`` CLI: ``python -m metatune.webhook_seal`` prints the
    key there, the same the CLI prints, and the key pair is made once."""
    env = {**os.environ, "METATUNE_WEBHOOK_KEY_FILE": str(tmp_path / "telemetry" / "webhook.key")}
    bare = subprocess.run(
        [sys.executable, "-m", "metatune.webhook_seal"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    printed = run(["webhooks", "public-key"], env)
    assert printed.returncode == 0, printed.stderr
    key = bare.stdout.strip()
    assert printed.stdout.strip() == key
    assert len(base64.b64decode(key)) == 32  # an X25519 public key
    assert (tmp_path / "telemetry" / "webhook.pub").read_text().strip() == key


def test_a_key_file_that_cannot_be_made_is_one_line_and_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = {**os.environ, "METATUNE_WEBHOOK_KEY_FILE": str(blocker / "webhook.key")}
    run_ = subprocess.run(
        [sys.executable, "-m", "metatune.webhook_seal"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run_.returncode == 1 and run_.stdout == ""
    assert run_.stderr.strip().startswith("cannot read or make the key pair at")
    assert "Traceback" not in run_.stderr
