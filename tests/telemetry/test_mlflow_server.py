"""The MLflow export against a real ``mlflow server`` (a subprocess with a SQLite store and a
local artifact root, as an MLflow user runs one): ``metatune telemetry export-mlflow`` sends a
study to it over HTTP, and MLflow's public client reads back the runs, their parameters, metrics
and the adapter's files with ``labels.json``, from where the server keeps artifacts.

The server's own dependencies (Flask and the rest) are test-only: requirements-test.lock."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metatune.bus import ensure_streams
from metatune.labels import LABELS_FILE, METADATA_FILE, label_maps
from tests.support.samples import CONFIG
from tests.support.servers import free_port
from tests.support.waiting import wait_for_sync

from .mlflow_study import (
    ADAPTER,
    cli,
    cli_env,
    put_adapter,
    recorded_study,
    runs_by_job,
    store,
    tracking,
)

LABELS = ["negative", "positive"]
SAVED = {**ADAPTER, METADATA_FILE: json.dumps({"labels": LABELS}).encode()}


def healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> bool:
    """The server answers /health; a server that exited fails at once, with its log."""
    if proc.poll() is not None:
        raise AssertionError(f"mlflow server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
    try:
        return httpx.get(f"{url}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``mlflow server`` on a free port of 127.0.0.1 (one worker, no job runner); yields its URL
    and its artifact root; stopped, with the workers it started, whatever the test did."""
    root = tmp_path / "server"
    root.mkdir()
    port, log = free_port(), root / "server.log"
    command = [
        *(sys.executable, "-m", "mlflow", "server"),
        *("--backend-store-uri", f"sqlite:///{root / 'm.db'}"),
        *("--default-artifact-root", str(root / "art")),
        *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
    ]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log.open("wb") as out:
        # its own process group: the server runs uvicorn as a child, stopped with it
        proc = subprocess.Popen(
            command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_sync(lambda: healthy(url, proc, log), "mlflow server answering", timeout=180)
        yield url, root / "art"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


async def test_a_study_exported_to_an_mlflow_server_reads_back_through_its_client(
    db, schema, js, tsettings, mlflow_server, tmp_path
) -> None:
    url, artifact_root = mlflow_server
    await ensure_streams(js, tsettings)
    await put_adapter(js, tmp_path, "adapters/a0.tar", SAVED)  # a1's is not in the store
    sid, jobs, events = recorded_study()
    await store(db, events)
    env = cli_env(tsettings, schema)

    done = await asyncio.to_thread(cli, [str(sid), "--tracking-uri", url, "--json"], env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["tracking_uri"] == url  # passed to MLflow as it is, and said so
    assert (summary["runs_created"], summary["runs_existing"]) == (3, 0)
    assert summary["adapters_missing"] == ["adapters/a1.tar"]
    # the server decides where artifacts go: under its --default-artifact-root
    assert summary["artifact_location"].startswith(str(artifact_root))

    client = tracking(url)
    runs = runs_by_job(client, sid)
    assert set(runs) == set(jobs)
    first, second, stopped = (runs[job] for job in jobs)
    assert first.info.run_name == f"trial #1 ({str(jobs[0])[:8]})"
    assert first.data.params["trial_number"] == "1" and first.data.params["trial_index"] == "0"
    assert first.data.params["datacenter"] == "fra1" and first.data.params["rank"] == str(
        CONFIG.rank
    )
    assert first.data.metrics["accuracy"] == pytest.approx(0.81)
    assert second.data.metrics["emissions_g_co2e"] == pytest.approx(200.0)
    assert second.data.metrics["energy_kwh"] == pytest.approx(2.5)
    assert [m.step for m in client.get_metric_history(first.info.run_id, "train_loss")] == list(
        range(1, 11)
    )
    assert stopped.info.status == "FAILED" and stopped.data.params["trial_number"] == "3"

    listed = {f.path for f in client.list_artifacts(first.info.run_id, "adapter")}
    assert listed == {f"adapter/{name}" for name in [*SAVED, LABELS_FILE]}
    back = Path(client.download_artifacts(first.info.run_id, "adapter", str(tmp_path / "back")))
    assert json.loads((back / LABELS_FILE).read_text()) == label_maps(LABELS)
    assert {name: (back / name).read_bytes() for name in ADAPTER} == ADAPTER
    assert (artifact_root / summary["experiment_id"]).is_dir()  # the files are where it said
    assert client.list_artifacts(second.info.run_id) == []

    again = await asyncio.to_thread(cli, [str(sid), "--tracking-uri", url, "--json"], env)
    assert again.returncode == 0, again.stderr
    repeat = json.loads(again.stdout)
    assert (repeat["runs_created"], repeat["runs_existing"]) == (0, 3)
    assert len(client.search_runs([summary["experiment_id"]])) == 3
