"""Exit codes and `--json` as the README's CLI section documents them, one row per command: 1 what
was asked for does not exist, 2 bad input, 3 a server the command needs does not answer; each
failure one `error:` line on stderr and, with `--json`, one JSON object on stdout naming the same
code. The real CLI process; a server that is down is a closed loopback port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.servers import free_port

from .recorded_study import publish

JOB = "00000000-0000-0000-0000-000000000001"
STUDY_FILE = str(Path(__file__).resolve().parents[2] / "examples" / "study.yaml")
OUT = "<a new folder>"  # where `adapter download` would write
NOT_FOUND, BAD_INPUT, UNAVAILABLE = 1, 2, 3

SERVERS_DOWN = [  # NATS and PostgreSQL both down: refused input before any connection, else 3
    (["status"], UNAVAILABLE),
    (["bus-init"], UNAVAILABLE),
    (["events"], UNAVAILABLE),
    (["events", "--kind", "nope"], BAD_INPUT),
    (["study", "list"], UNAVAILABLE),
    (["study", "show", "abcd"], UNAVAILABLE),
    (["study", "show", "not-an-id"], BAD_INPUT),
    (["results", "abcd"], UNAVAILABLE),
    (["submit", STUDY_FILE], UNAVAILABLE),
    (["submit", STUDY_FILE, "--trials", "0"], BAD_INPUT),
    (["cancel", JOB], UNAVAILABLE),
    (["cancel", "12345"], BAD_INPUT),
    (["cancel", "--study", "abcd"], UNAVAILABLE),
    (["adapter", "download", JOB, "--out", OUT], UNAVAILABLE),
    (["report", "0000"], UNAVAILABLE),
    (["report", "0000", "--format", "pdf"], BAD_INPUT),
    (["webhooks", "list"], UNAVAILABLE),
    (["telemetry", "verify"], UNAVAILABLE),
    (["kb", "stats"], UNAVAILABLE),
]

NOTHING_LOGGED = [  # NATS answers, its event log holds nothing: what was asked for does not exist
    ["events", "--study", "abcd"],
    ["study", "show", "abcd"],
    ["results", "abcd"],
    ["cancel", JOB],
    ["cancel", "--study", "abcd"],
    ["adapter", "download", JOB, "--out", OUT],
]


def assert_fails(args: list[str], env: dict[str, str], code: int, tmp_path: Path) -> None:
    """``args`` with ``--json``: exit ``code``, one ``error:`` line, and that error as one JSON
    object on stdout."""
    result = run([str(tmp_path / "adapter") if a == OUT else a for a in args] + ["--json"], env)
    assert result.returncode == code, (args, result.stdout, result.stderr)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: "), (args, line)
    assert json.loads(result.stdout) == {"error": line.removeprefix("error: "), "exit_code": code}


@pytest.mark.slow  # a CLI process per row, some waiting out a connection timeout
@pytest.mark.parametrize(("args", "code"), SERVERS_DOWN, ids=[" ".join(a) for a, _ in SERVERS_DOWN])
def test_with_the_servers_down(args: list[str], code: int, env_for, tmp_path: Path) -> None:
    env = env_for(
        METATUNE_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        METATUNE_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/metatune",
        METATUNE_CONNECT_TIMEOUT_S="0.5",
    )
    assert_fails(args, env, code, tmp_path)


@pytest.mark.parametrize("args", NOTHING_LOGGED, ids=" ".join)
async def test_with_nothing_in_the_log(
    args: list[str], private_nats: str, env_for, tmp_path: Path
) -> None:
    await publish(private_nats, [])  # the streams, empty
    env = env_for(METATUNE_NATS_URL=private_nats)
    assert_fails(args, env, NOT_FOUND, tmp_path)


async def test_status_exits_1_while_no_service_is_healthy(private_nats: str, env_for) -> None:
    status = run(["status", "--json"], env_for(METATUNE_NATS_URL=private_nats))
    assert status.returncode == 1 and status.stderr == "", status.stderr
    assert json.loads(status.stdout)["services"] == []
