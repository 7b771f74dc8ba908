"""examples/webhook_receiver.py, the receiver the README's first study points its webhook at: it
accepts deliveries signed with its secret (one line each, study.completed with its data), refuses
others with 401, and ends after the type given to --exit-on."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
from standardwebhooks import Webhook

REPO = Path(__file__).resolve().parents[2]
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # a test key, base64 of 24 bytes
STUDY, JOB = "5063d6ea-600e-47a9-83c3-535c31b29903", "b4525a48-aa52-5b8b-8f33-e327738a9a1e"


def post(url: str, kind: str, data: dict, msg_id: str, secret: str = SECRET) -> int:
    body = json.dumps({"type": kind, "timestamp": datetime.now(UTC).isoformat(), "data": data})
    now = datetime.now(UTC)
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, now, body),
        "content-type": "application/json",
    }
    return httpx.post(url, content=body, headers=headers, timeout=30).status_code


def test_the_receiver_verifies_prints_and_ends_on_study_completed() -> None:
    script = REPO / "examples" / "webhook_receiver.py"
    receiver = subprocess.Popen(
        [
            sys.executable,
            str(script),
            "--secret",
            SECRET,
            "--port",
            "0",
            "--exit-on",
            "study.completed",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert receiver.stdout is not None
        first = receiver.stdout.readline()
        assert first.startswith("receiving on http://127.0.0.1:"), first
        url = first.split()[-1]
        job = {"subject": "metatune.jobs.requested", "event": {"job_id": JOB, "study_id": STUDY}}
        assert post(url, "job.requested", job, "msg_1") == 204
        other = "whsec_" + "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJC"
        assert post(url, "job.requested", job, "msg_2", secret=other) == 401
        summary = {"study_id": STUDY, "name": "snips-intents", "best": {"metric": 0.965}}
        assert post(url, "study.completed", summary, "msg_3") == 204
        out, err = receiver.communicate(timeout=60)  # it ends by itself after study.completed
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    assert receiver.returncode == 0, err
    lines = out.splitlines()
    assert lines[:3] == [
        f"job.requested {JOB} (signature verified)",
        "unverified delivery msg_2: refused",
        f"study.completed {STUDY} (signature verified)",
    ]
    assert json.loads("\n".join(lines[3:])) == summary
