"""The `metatune` CLI on a machine where nothing answers on the configured URLs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from tests.support.cli import run
from tests.support.servers import free_port

JOB = "00000000-0000-0000-0000-000000000001"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow  # waits out connection timeouts
def test_unreachable_nats_gives_one_line_error_and_the_unavailable_exit_code(
    env_for, tmp_path: Path
) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    env = env_for(METATUNE_NATS_URL=url, METATUNE_CONNECT_TIMEOUT_S="0.5")
    for args in (
        ["status"],
        ["events"],
        ["study", "list"],
        ["study", "show", "abcd"],
        ["results", "abcd"],
        ["submit", str(EXAMPLES / "study.yaml")],
        ["cancel", JOB],
        ["cancel", "--study", "abcd"],
        ["adapter", "download", JOB, "--out", str(tmp_path / "adapter")],
        ["bus-init"],
    ):
        result = run(args, env)
        assert result.returncode == 3, (args, result.stderr)  # unavailable, not usage (2)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and url in lines[0], (args, result.stderr)
        assert result.stdout == "", args


@pytest.mark.slow  # waits out connection timeouts
def test_unreachable_database_gives_one_line_error_not_a_traceback(env_for, tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/metatune"
    env = env_for(
        METATUNE_DATABASE_URL=url,
        METATUNE_NATS_URL=f"nats://127.0.0.1:{free_port()}",  # verify reads both
        METATUNE_CONNECT_TIMEOUT_S="0.5",
    )
    export = tmp_path / "DE_2024_hourly.csv"
    export.write_text(
        "Datetime (UTC),Carbon Intensity gCO2eq/kWh (direct)\n2024-01-01 00:00:00,300\n"
    )
    for args in (
        ["telemetry", "verify"],
        ["webhooks", "list"],
        ["report", "0000"],
        ["kb", "stats"],  # psycopg's reason runs over two lines
        ["forecaster", "backfill", "--region", "DE", "--from", "2024-01-01", "--to", "2024-01-02"],
        ["forecaster", "import-csv", str(export), "--zone", "DE"],
    ):
        result = run(args, env)
        assert result.returncode == 3, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
        assert result.stdout == "", (args, result.stdout)  # no progress bar before it


def test_down_and_secrets_json_is_one_object_of_names_never_secrets(
    env_for, tmp_path: Path
) -> None:
    env = env_for(METATUNE_NATS_SECRETS_DIR=str(tmp_path / "nats"))
    down = run(["down", "--json"], env)
    assert down.returncode == 0 and json.loads(down.stdout) == {"stopped": []}, (
        down.stdout + down.stderr
    )
    made = run(["secrets", "--json", "--db-password-file", str(tmp_path / "db.password")], env)
    assert made.returncode == 0, made.stderr
    report = json.loads(made.stdout)
    assert (
        report["directory"] == str(tmp_path / "nats")
        and not report["rotated"]
        and report["db_password_written"]
    )
    assert {"admin.password", "auth.conf", "scheduler.nk", "submitter.nk"} <= set(report["files"])
    assert set(report["files"]) == {p.name for p in (tmp_path / "nats").iterdir()}
    secrets = [
        p.read_text().strip()
        for p in [
            *(tmp_path / "nats").glob("*.nk"),
            tmp_path / "nats" / "admin.password",
            tmp_path / "db.password",
        ]
    ]
    assert secrets and not any(secret in made.stdout for secret in secrets)


@pytest.mark.integration  # starts the embedded nats-server and PostgreSQL itself
@pytest.mark.slow
def test_up_status_submit_down_starts_embedded_servers_and_leaves_nothing(
    env_for, tmp_path: Path
) -> None:
    data_dir = tmp_path / "platform"
    env = env_for(
        METATUNE_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        METATUNE_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/metatune",
        METATUNE_DATA_DIR=str(data_dir),
        METATUNE_LOCAL_DATACENTERS='["fra1"]',
        METATUNE_UP_TIMEOUT_S="180",
    )
    try:
        up = run(["up", "--json"], env)
        assert up.returncode == 0, up.stdout + up.stderr
        started = json.loads(up.stdout)  # one object: progress went to stderr
        assert {"nats-server", "postgres", "scheduler", "trainer-agent.fra1"} <= set(
            started["started"]
        )
        assert started["status"]["nats"]["embedded"] and len(started["status"]["services"]) == 6
        status = run(["status", "--json"], env)
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert (
            report["nats"]["embedded"]
            and report["postgres"]["embedded"]
            and report["postgres"]["reachable"]
        )
        healthy = {row["instance"] for row in report["services"] if row["healthy"]}
        assert healthy == {
            "profiler",
            "recommender",
            "forecaster",
            "scheduler",
            "telemetry",
            "trainer-agent.fra1",
        }

        def pids_now() -> dict[str, int]:
            return {
                p["name"]: p["pid"]
                for p in json.loads((data_dir / "run" / "state.json").read_text())["processes"]
            }

        # one service restarted while the rest run; a crashed one started alone by `up`
        before = pids_now()
        restarted = run(["restart", "scheduler", "--json"], env)
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert json.loads(restarted.stdout)["restarted"] == ["scheduler"]
        after = pids_now()
        assert after["scheduler"] != before["scheduler"]
        assert {k: v for k, v in after.items() if k != "scheduler"} == {
            k: v for k, v in before.items() if k != "scheduler"
        }
        psutil.Process(after["trainer-agent.fra1"]).kill()
        again = run(["up"], env)
        assert again.returncode == 0 and "trainer-agent.fra1" in again.stdout, (
            again.stdout + again.stderr
        )
        revived = pids_now()
        assert revived["trainer-agent.fra1"] != after["trainer-agent.fra1"]
        assert {k: v for k, v in revived.items() if k != "trainer-agent.fra1"} == {
            k: v for k, v in after.items() if k != "trainer-agent.fra1"
        }

        dataset = tmp_path / "tiny.jsonl"
        dataset.write_text(
            "".join(
                json.dumps({"text": f"example {i}", "label": str(i % 2)}) + "\n" for i in range(20)
            )
        )
        submitted = run(
            ["submit", str(dataset), "--deadline", "12h", "--trials", "2", "--json"], env
        )
        assert submitted.returncode == 0, submitted.stderr
        receipt = json.loads(submitted.stdout)
        study_id = receipt["study_id"]
        assert receipt["dataset"]["ref"] == f"studies/{study_id}/tiny.jsonl"
        assert receipt["dataset"]["size_bytes"] == dataset.stat().st_size
        events = run(["events", "--json", "--last", "200"], env)
        subjects = [
            (e["subject"], e.get("study_id"), e["event_id"])
            for e in map(json.loads, events.stdout.splitlines())
        ]
        assert ("metatune.datasets.submitted.default", study_id, receipt["event_id"]) in subjects
    finally:
        state = data_dir / "run" / "state.json"
        processes = json.loads(state.read_text())["processes"] if state.exists() else []
        pids = [p["pid"] for p in processes]
        down = run(["down", "--json"], env)
    assert down.returncode == 0, down.stderr
    assert sorted(json.loads(down.stdout)["stopped"]) == sorted(p["name"] for p in processes)
    assert pids and not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        for pid in pids
    )
    leftovers = [
        p.info
        for p in psutil.process_iter(["pid", "cmdline"])
        if str(data_dir) in " ".join(p.info["cmdline"] or []) and p.info["pid"] != os.getpid()
    ]
    assert leftovers == []
