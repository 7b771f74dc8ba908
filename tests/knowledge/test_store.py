"""The knowledge-base store on the real PostgreSQL: migrations, runs once by id, profiles, files, stats."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from metatune.contracts import DatasetLocation, StudySpec, TaskType
from metatune.knowledge import KB_SCHEMA_VERSION, KbFileHeader, RunStatus
from metatune.knowledge.errors import KbSchemaMismatch
from metatune.knowledge.files import write_kb_file
from metatune.knowledge.store import KnowledgeStore, dataset_name_of
from metatune.settings import Settings

from .samples import FEATURES, run

pytestmark = pytest.mark.integration  # every test reaches the real PostgreSQL


async def tables(store: KnowledgeStore) -> set[str]:
    async with await psycopg.AsyncConnection.connect(store.url) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (store.schema,),
        )
        return {row[0] for row in await cur.fetchall()}


async def test_migrations_from_empty_then_rerun_apply_nothing() -> None:
    kb = KnowledgeStore(Settings().database_url, schema=f"kb_t_{uuid.uuid4().hex[:10]}")
    try:
        assert await kb.migrate() == ["kb_0001_runs"]
        assert {"kb_runs", "kb_study_profiles", "kb_imports"} <= await tables(kb)
        await kb.add_run(run("a"))
        assert await kb.migrate() == []  # re-run: nothing applied, nothing lost
        assert [r.run_id for r in await kb.runs()] == ["a"]
    finally:
        await kb.drop_schema()


async def test_a_run_is_stored_once_by_id_and_comes_back_whole(store: KnowledgeStore) -> None:
    original = run("seed-kb:sst2:c000:s13")
    assert await store.add_run(original) is True
    assert await store.add_run(original) is False
    assert (
        await store.add_run(original.model_copy(update={"metric": 0.1})) is False
    )  # stored stays as it is
    assert await store.runs() == [original]
    assert await store.run(original.run_id) == original


async def test_filters_and_failed_runs(store: KnowledgeStore) -> None:
    await store.add_runs(
        [
            run("a"),
            run("b", base_model="other-model"),
            run("c", task="pair_classification"),
            run("d", source="public:deberta_mnli"),
            run("e", status=RunStatus.failed),
        ]
    )
    assert [r.run_id for r in await store.runs()] == ["a", "b", "c", "d"]
    assert [r.run_id for r in await store.runs(include_failed=True)] == ["a", "b", "c", "d", "e"]
    assert [r.run_id for r in await store.runs(base_model="other-model")] == ["b"]
    assert [r.run_id for r in await store.runs(task="pair_classification")] == ["c"]
    assert [r.run_id for r in await store.runs(source="public:*")] == ["d"]
    assert [
        r.run_id
        for r in await store.runs(
            source="seed-kb", base_model="all-MiniLM-L6-v2", task="classification"
        )
    ] == ["a"]


async def test_a_completion_replaces_a_stored_failure_of_the_same_run(
    store: KnowledgeStore,
) -> None:
    assert await store.add_run(run("job", status=RunStatus.failed)) is True
    assert await store.add_run(run("job", metric=0.9)) is True
    assert (await store.run("job")).status is RunStatus.completed
    assert (
        await store.add_run(run("job", status=RunStatus.failed)) is False
    )  # a late failure changes nothing
    assert (await store.run("job")).metric == 0.9


async def test_a_profile_fills_the_runs_stored_without_one(store: KnowledgeStore) -> None:
    from datetime import UTC, datetime

    study = uuid.uuid4()
    waiting = run("job-1", study_id=study, dataset=f"study:{study}").model_copy(
        update={"profile_missing": True}
    )
    waiting = waiting.model_copy(
        update={"dataset": waiting.dataset.model_copy(update={"features": None})}
    )
    other = run("job-2", study_id=uuid.uuid4())
    await store.add_runs([waiting, other])
    spec = StudySpec(
        dataset=DatasetLocation(kind="object", ref=f"studies/{study}/snips_intents.jsonl.gz"),
        task=TaskType.classification,
        base_model="all-MiniLM-L6-v2",
        deadline=datetime(2026, 3, 2, tzinfo=UTC),
    )
    assert await store.profile(study) is None
    assert await store.save_profile(study, spec, FEATURES) == 1
    assert (
        await store.save_profile(study, spec, FEATURES) == 0
    )  # a redelivered profile fills nothing twice
    filled = await store.run("job-1")
    assert not filled.profile_missing and filled.dataset.features == FEATURES
    assert filled.dataset.name == "snips_intents" == dataset_name_of(spec)
    assert (await store.profile(study)).features == FEATURES
    assert await store.run("job-2") == other
    assert [r.run_id for r in await store.study_runs(study)] == ["job-1"]


async def test_import_is_idempotent_and_refuses_another_schema_version(
    store: KnowledgeStore, tmp_path: Path
) -> None:
    path = tmp_path / "kb.jsonl.gz"
    write_kb_file(path, KbFileHeader(), [run("a"), run("b", dataset="rte")])
    first = await store.import_file(path)
    assert (first.runs, first.added, first.existed) == (2, 2, 0)
    again = await store.import_file(path)
    assert (again.runs, again.added, again.existed) == (2, 0, 2)
    assert len(await store.runs()) == 2
    old = tmp_path / "old.jsonl"
    old.write_text(
        json.dumps({"kind": "metatune-knowledge-base", "schema_version": KB_SCHEMA_VERSION + 1})
        + "\n"
    )
    with pytest.raises(
        KbSchemaMismatch, match=f"version {KB_SCHEMA_VERSION + 1}.*version {KB_SCHEMA_VERSION}"
    ):
        await store.import_file(old)


async def test_stats(store: KnowledgeStore) -> None:
    await store.add_runs(
        [
            run("a1", dataset="sst2", metric=0.80, baseline=0.55, rank=4),
            run("a2", dataset="sst2", metric=0.90, baseline=0.55, rank=8),
            run(
                "a3", dataset="sst2", metric=0.70, baseline=0.55, rank=8
            ),  # a repeat: same configuration
            run("b1", dataset="rte", metric=0.50, baseline=0.52, rank=4),
            run(
                "b2",
                dataset="rte",
                metric=0.51,
                baseline=0.52,
                rank=16,
                status=RunStatus.early_stopped,
            ),
            run("b3", dataset="rte", rank=32, status=RunStatus.failed),
            run(
                "p1",
                dataset="deberta-base_mnli",
                metric=0.87,
                baseline=None,
                source="public:deberta_mnli",
            ),
        ]
    )
    stats = await store.stats()
    assert (stats.runs, stats.datasets) == (7, 3)
    assert (stats.configs_per_dataset_min, stats.configs_per_dataset_max) == (
        1,
        2,
    )  # failures not counted
    assert (stats.runs_completed, stats.runs_early_stopped, stats.runs_failed) == (5, 1, 1)
    assert stats.runs_per_source == {"public:deberta_mnli": 1, "seed-kb": 6}
    assert stats.datasets_per_source == {"public:deberta_mnli": 1, "seed-kb": 2}
    assert (stats.datasets_with_majority_baseline, stats.datasets_beating_majority_baseline) == (
        2,
        1,
    )
    assert stats.median_margin_over_majority_baseline == pytest.approx(
        ((0.90 - 0.55) + (0.51 - 0.52)) / 2
    )
    assert stats.min_margin_over_majority_baseline == pytest.approx(-0.01)
    assert stats.repeated_configs == 1  # a2 and a3; an early-stopped run is no repeat
    assert stats.seed_noise_std_median == pytest.approx(statistics.stdev([0.90, 0.70]))


def cli(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "METATUNE_DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "metatune_cli.cli", "kb", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


async def test_cli_import_and_stats_json(store: KnowledgeStore, tmp_path: Path) -> None:
    url = f"{store.url}?options=-csearch_path%3D{store.schema}"
    path = tmp_path / "seed.jsonl"
    write_kb_file(
        path,
        KbFileHeader(),
        [run("a1", rank=4), run("a2", rank=8), run("b1", dataset="rte", baseline=0.9)],
    )
    done = cli("import", str(path), "--json", database_url=url)
    assert done.returncode == 0, done.stderr
    [report] = json.loads(done.stdout)["reports"]
    assert (
        report | {"name": "seed.jsonl", "runs": 3, "added": 3, "existed": 0, "torn": False}
        == report
    )
    assert report["sources"] == {"seed-kb": 3}
    done = cli("stats", "--json", database_url=url)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert {k: stats[k] for k in ("runs", "datasets", "configs_per_dataset_min")} == {
        "runs": 3,
        "datasets": 2,
        "configs_per_dataset_min": 1,
    }
    assert (
        stats["runs_per_source"] == {"seed-kb": 3}
        and stats["datasets_beating_majority_baseline"] == 1
    )
    assert len(await store.runs()) == 3  # the CLI wrote into this test's schema


def test_cli_never_prints_the_database_password(tmp_path: Path) -> None:
    done = cli("stats", database_url="postgresql://postgres:hunter2-secret@127.0.0.1:1/test")
    assert done.returncode == 3  # unavailable
    assert "hunter2-secret" not in done.stdout + done.stderr and "not reachable" in done.stderr
    bad = tmp_path / "old.jsonl"
    bad.write_text(json.dumps({"kind": "metatune-knowledge-base", "schema_version": 99}) + "\n")
    done = cli("import", str(bad), database_url=Settings().database_url)
    assert (
        done.returncode == 2
        and "version 99" in done.stderr
        and f"version {KB_SCHEMA_VERSION}" in done.stderr
    )
