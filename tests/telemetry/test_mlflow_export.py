"""The MLflow export: a study's finished trials as one run each (parameters, the training curve
per step, final metrics, energy and emissions, tags, the adapter's files), read back with
MLflow's public client from a local tracking store; exporting again adds nothing; the service
exports a study when it completes only when ``METATUNE_MLFLOW_TRACKING_URI`` is set, and
reports a failed export as an error event, then tries again."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID, uuid4

import pytest

from metatune import __version__, subjects
from metatune_telemetry.app import create_service
from metatune_telemetry.exports.adapters.mlflow_export import (
    ExportWorker,
    MlflowExportError,
    connect,
    export_study,
)
from metatune_telemetry.exports.domain.mlflow_runs import (
    TAG_EXPORT,
    TAG_JOB,
    StudyRecord,
    TrialRecord,
    final_metrics,
    run_params,
    run_tags,
    status_label,
)
from tests.support.samples import CONFIG, NOW, SPEC
from tests.support.waiting import wait_for

from .conftest import count, publish, publish_ready
from .mlflow_study import (
    ADAPTER,
    STEPS,
    cli,
    cli_env,
    put_adapter,
    recorded,
    recorded_study,
    runs_by_job,
    tracking,
)

if TYPE_CHECKING:
    from mlflow.entities import Run


@pytest.fixture
def mlflow_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A local MLflow tracking store (MLflow keeps its file store behind this switch)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


async def test_each_finished_trial_is_one_run_and_a_second_export_adds_none(
    db, js, tsettings, mlflow_uri, tmp_path
) -> None:
    sid, jobs, fetch = await recorded(db, js, tsettings, tmp_path)  # a1's adapter is not stored

    first = await export_study(db, sid, mlflow_uri, fetch)
    assert (first.runs_created, first.runs_existing) == (3, 0)
    assert first.experiment == f"sst2-sweep ({sid})"
    assert first.adapters_missing == ["adapters/a1.tar"]

    client = tracking(mlflow_uri)
    runs = runs_by_job(client, sid)
    assert set(runs) == set(jobs)
    for i, (job, accuracy, wh, grams) in enumerate(
        [(jobs[0], 0.81, 1500.0, 300.0), (jobs[1], 0.88, 2500.0, 200.0)]
    ):
        run = runs[job]
        assert (
            run.info.status == "FINISHED"
            and run.info.run_name == f"trial #{i + 1} ({str(job)[:8]})"
        )
        config = CONFIG.model_dump(mode="json")  # as the run reported it trained
        assert run.data.params == {
            **{k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()},
            "base_model": SPEC.base_model,
            "dataset": SPEC.dataset.ref,
            "datacenter": "fra1",
            "trial_index": str(i),
            "trial_number": str(i + 1),  # as the run's name: "trial #1" has trial_number 1
        }
        assert run.data.metrics == pytest.approx(
            {
                "val_loss": 0.5,
                "accuracy": accuracy,
                "energy_kwh": wh / 1000,
                "emissions_g_co2e": grams,
                "train_loss": 1.0 / STEPS,  # the curve's last step
                "learning_rate": 1e-4,
            }
        )
        curve = client.get_metric_history(run.info.run_id, "train_loss")
        assert [(m.step, m.value) for m in curve] == [(s, 1.0 / s) for s in range(1, STEPS + 1)]
        assert [m.step for m in client.get_metric_history(run.info.run_id, "accuracy")] == [100]
        energy = client.get_metric_history(run.info.run_id, "energy_kwh")
        assert [m.timestamp for m in energy] == [int((NOW + timedelta(hours=2)).timestamp() * 1000)]
        tags = run.data.tags
        assert tags["metatune.study_id"] == str(sid) and tags["metatune.status"] == "completed"
        assert tags["metatune.early_stopped"] == "false" and tags["metatune.version"] == __version__
        assert tags[TAG_EXPORT] == "complete"
    failed = runs[jobs[2]]  # its request's configuration, where the failure named none
    assert failed.info.status == "FAILED" and failed.data.tags["metatune.status"] == "failed"
    assert failed.data.params["rank"] == "12" and failed.data.params["trial_index"] == "2"
    assert failed.data.params["trial_number"] == "3" and failed.info.run_name.startswith("trial #3")
    assert failed.data.metrics == pytest.approx({"energy_kwh": 0.1, "emissions_g_co2e": 20.0})
    adapter = runs[jobs[0]].info.run_id
    assert {f.path for f in client.list_artifacts(adapter, "adapter")} == {
        f"adapter/{name}" for name in ADAPTER
    }
    out = Path(client.download_artifacts(adapter, "adapter", str(tmp_path / "back")))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == ADAPTER
    assert client.list_artifacts(runs[jobs[1]].info.run_id) == []
    assert runs[jobs[1]].data.tags["metatune.adapter_missing"] == "not in the object store"

    again = await export_study(db, sid, mlflow_uri, fetch)
    assert (again.runs_created, again.runs_existing) == (0, 3)
    assert set(runs_by_job(client, sid)) == set(jobs)
    assert len(client.search_runs([again.experiment_id])) == 3


async def test_two_exports_of_a_study_at_once_leave_one_run_per_trial(
    db, js, tsettings, mlflow_uri, tmp_path
) -> None:
    """The command and the service exporting the same study at the same moment."""
    sid, jobs, fetch = await recorded(db, js, tsettings, tmp_path)

    both = await asyncio.gather(*(export_study(db, sid, mlflow_uri, fetch) for _ in range(2)))
    assert sorted((e.runs_created, e.runs_existing) for e in both) == [(0, 3), (3, 0)]
    assert len(tracking(mlflow_uri).search_runs([both[0].experiment_id])) == len(jobs)


async def test_a_run_an_interrupted_export_left_is_made_again(
    db, js, tsettings, mlflow_uri
) -> None:
    sid, jobs, fetch = await recorded(db, js, tsettings)

    client = tracking(mlflow_uri)
    experiment = client.create_experiment(f"sst2-sweep ({sid})")
    half = client.create_run(experiment, tags={TAG_JOB: str(jobs[0])})  # never marked complete
    summary = await export_study(db, sid, mlflow_uri, fetch)
    assert (summary.runs_created, summary.runs_existing) == (3, 0)
    runs = runs_by_job(client, sid)
    assert set(runs) == set(jobs) and half.info.run_id not in {r.info.run_id for r in runs.values()}
    assert client.get_run(half.info.run_id).info.lifecycle_stage == "deleted"


def test_without_mlflow_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the extra were not installed
    with pytest.raises(MlflowExportError, match=r"pip install metatune-telemetry\[mlflow\]"):
        connect("file:///nowhere")


def test_an_early_stopped_trial_says_so_and_writes_lists_as_json() -> None:
    trial = TrialRecord(
        job_id=uuid4(),
        trial_index=2,
        status="completed",
        finished_at=NOW,
        base_model="all-MiniLM-L6-v2",
        dataset=None,
        datacenters=["fra1", "osl1"],
        config={"rank": 8, "target_modules": ["query", "value"], "max_steps": None},
        metrics={"val_loss": 0.4, "accuracy": None, "perplexity": float("nan")},
        energy_wh=250.0,
        emissions_g=12.5,
        early_stopped=True,
        stop_reason="plateau",
        steps=40,
    )
    assert status_label(trial) == "early-stopped (plateau, step 40)"
    tags = run_tags(trial, StudyRecord(study_id=uuid4(), name=None, trials=[trial]), "9.9")
    assert tags["metatune.early_stopped"] == "true" and tags["metatune.version"] == "9.9"
    params = run_params(trial)
    assert params["target_modules"] == '["query", "value"]' and params["max_steps"] == "null"
    assert params["datacenter"] == "fra1,osl1" and params["dataset"] == "null"
    assert {m.key: (m.value, m.step) for m in final_metrics(trial)} == {
        "val_loss": (0.4, 40),
        "energy_kwh": (0.25, 40),
        "emissions_g_co2e": (12.5, 40),
    }


async def test_the_command_exports_a_study_and_says_why_not_in_one_line(
    db, schema, js, tsettings, mlflow_uri, tmp_path
) -> None:
    sid, jobs, _ = await recorded(db, js, tsettings, tmp_path)
    env = cli_env(tsettings, schema)
    done = await asyncio.to_thread(
        cli, [str(sid)[:13], "--tracking-uri", mlflow_uri, "--json"], env
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["runs_created"] == 3 and summary["adapters_missing"] == ["adapters/a1.tar"]
    client = tracking(mlflow_uri)
    assert set(runs_by_job(client, sid)) == set(jobs)
    adapter = runs_by_job(client, sid)[jobs[0]].info.run_id
    assert len(client.list_artifacts(adapter, "adapter")) == len(ADAPTER)

    unknown, no_uri = await asyncio.gather(
        asyncio.to_thread(cli, [str(uuid4()), "--tracking-uri", mlflow_uri], env),
        asyncio.to_thread(cli, [str(sid)], env),
    )
    for result, code, words in ((unknown, 1, "no single study"), (no_uri, 2, "--tracking-uri")):
        lines = result.stderr.strip().splitlines()
        assert result.returncode == code and len(lines) == 1 and words in lines[0], result.stderr


def export_task_running() -> bool:
    return any(t.get_name() == "export_to_mlflow" for t in asyncio.all_tasks())


async def test_the_service_exports_a_study_when_it_completes_only_when_set(
    schema, js, tsettings, mlflow_uri, tmp_path
) -> None:
    sid, jobs, events = recorded_study()
    unset = create_service(tsettings, schema=schema)
    async with unset.running():
        await asyncio.wait_for(unset.runtime.ready.wait(), 60)
        assert not export_task_running()
    settings = tsettings.model_copy(update={"mlflow_tracking_uri": mlflow_uri})
    service = create_service(settings, schema=schema)
    async with service.running():
        await put_adapter(js, tmp_path, "adapters/a0.tar")
        for subject, event in events:
            await publish(js, settings, subject, event)
        assert export_task_running()
        client = tracking(mlflow_uri)
        from mlflow.exceptions import MlflowException

        async def exported() -> dict[UUID, Run]:
            try:
                runs = await asyncio.to_thread(runs_by_job, client, sid)
            except (MlflowException, ValueError, KeyError):  # a file store read while written
                return {}
            done = all(r.data.tags.get(TAG_EXPORT) == "complete" for r in runs.values())
            return runs if len(runs) == 3 and done else {}

        runs = await wait_for(exported, "the completed study in MLflow", timeout=120)
    assert set(runs) == set(jobs)
    adapter = runs[jobs[0]].info.run_id
    assert len(client.list_artifacts(adapter, "adapter")) == len(ADAPTER)


async def test_a_failed_export_is_an_error_event_and_ingestion_goes_on(
    schema, js, tsettings, tmp_path
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the tracking store would be")
    settings = tsettings.model_copy(update={"mlflow_tracking_uri": blocked.as_uri()})
    sid, _, events = recorded_study()
    service = create_service(settings, schema=schema)
    async with service.running():
        await publish_ready(service, js, events)

        async def reported() -> bool:
            return (
                await count(
                    service.runtime.db,
                    "SELECT count(*) FROM event_log WHERE subject = %s "
                    "AND payload->>'code' = 'mlflow_export_failed' "
                    "AND payload->>'correlation_id' = %s",
                    (subjects.errors("telemetry"), str(sid)),
                )
                >= 1
            )

        await wait_for(reported, "the export's error event", timeout=120)
        [(message,)] = await service.runtime.db.fetch(
            "SELECT payload->>'message' FROM event_log WHERE payload->>'code' = %s LIMIT 1",
            ("mlflow_export_failed",),
        )
        assert message.startswith(f"MLflow export of study {sid} to {blocked.as_uri()} failed")
        assert "\n" not in message
        # every event of the study stored all the same
        ids = [event.event_id for _, event in events]
        stored = "SELECT count(*) FROM event_log WHERE event_id = ANY(%s)"
        assert await count(service.runtime.db, stored, (ids,)) == len(events)


async def test_a_failed_export_is_tried_again(db, js, tsettings, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    sid, jobs, fetch = await recorded(db, js, tsettings)
    blocked = tmp_path / "store"
    blocked.write_text("in the way")
    failures: list[tuple[UUID, Exception]] = []

    async def failed(study_id: UUID, exc: Exception) -> None:
        failures.append((study_id, exc))

    worker = ExportWorker(db, blocked.as_uri(), fetch, failed, retry_s=0.05, max_retry_s=0.05)
    assert await worker.export_ended() == 0
    assert [s for s, _ in failures] == [sid] and isinstance(failures[0][1], MlflowExportError)
    blocked.unlink()  # the store can be made now
    assert await wait_for(worker.export_ended, "the export tried again") == 1
    assert set(runs_by_job(tracking(blocked.as_uri()), sid)) == set(jobs)
    assert await worker.export_ended() == 0  # once per study
