"""The MLflow export as MLflow users expect it, against the stores MLflow 3 offers: a SQLite store
(its URI passed through unchanged, the artifacts beside it or where ``--artifact-location`` says,
never in ``./mlruns`` of the folder the export runs in) and a database store without a folder
(refused in one line). The adapter's files come with ``labels.json``, as ``metatune adapter
download`` writes them. (A tracking server decides where artifacts go itself; ``mlflow server``
needs MLflow's server extras, which the lock does not install, so no test starts one.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from metatune.labels import METADATA_FILE, label_maps
from metatune_telemetry.exports.adapters.mlflow_export import MlflowExportError, export_study

from .mlflow_study import ADAPTER, cli, cli_env, recorded, runs_by_job, tracking

LABELS = ["negative", "positive"]
# MLflow's SQLAlchemy store (a SQLite tracking store, read back here) still uses the loader
# strategy SQLAlchemy 2.1 deprecates
pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)


# an adapter as the trainer-agent uploads it: the PEFT files and its ``metatune.json``
WITH_LABELS = {**ADAPTER, METADATA_FILE: json.dumps({"labels": LABELS}).encode()}


async def test_a_sqlite_store_keeps_its_uri_and_its_artifacts_beside_it(
    db, js, tsettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, jobs, fetch = await recorded(db, js, tsettings, tmp_path, WITH_LABELS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # where the export runs: no mlruns may appear here
    db_file = tmp_path / "store" / "mlflow.db"
    db_file.parent.mkdir()
    uri = f"sqlite:///{db_file}"  # four slashes: an absolute path
    summary = await export_study(db, sid, uri, fetch)
    assert summary.tracking_uri == uri  # as given, not one slash less
    beside = db_file.parent / "mlartifacts" / str(sid)
    assert summary.artifact_location == beside.as_uri()
    assert not (elsewhere / "mlruns").exists()
    run = runs_by_job(tracking(uri), sid)[jobs[0]]
    files = beside / run.info.run_id / "artifacts" / "adapter"
    assert json.loads((files / "labels.json").read_text()) == label_maps(LABELS)
    assert {p.name for p in files.iterdir()} == {*ADAPTER, METADATA_FILE, "labels.json"}


async def test_the_command_puts_the_artifacts_where_it_is_told(
    db, schema, js, tsettings, tmp_path: Path
) -> None:
    sid, jobs, _ = await recorded(db, js, tsettings, tmp_path, WITH_LABELS)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    there = tmp_path / "artifacts"
    done = await asyncio.to_thread(
        cli,
        [str(sid), "--tracking-uri", uri, "--artifact-location", str(there)],
        cli_env(tsettings, schema),
    )
    assert done.returncode == 0, done.stderr
    assert f"at {uri} (artifacts at {there})" in done.stdout  # the URI unchanged, and where
    run = runs_by_job(tracking(uri), sid)[jobs[0]]
    assert (there / run.info.run_id / "artifacts" / "adapter" / "labels.json").is_file()


async def test_a_database_store_without_an_artifact_location_is_refused(
    db, js, tsettings, tmp_path: Path
) -> None:
    sid, _, fetch = await recorded(db, js, tsettings, tmp_path, WITH_LABELS)
    with pytest.raises(MlflowExportError, match="give --artifact-location") as refused:
        await export_study(db, sid, "postgresql://mlflow:secret@db.example/mlflow", fetch)
    assert "secret" not in str(refused.value) and "\n" not in str(refused.value)
