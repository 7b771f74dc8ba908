"""The knowledge base in PostgreSQL (or TimescaleDB): runs, study profiles, imported files.

One row per run (``kb_runs``, keyed by ``run_id``: the job id for platform runs), with the columns
queries filter and sort by (dataset, base model, task, source, status, metric...) typed, and the
configuration, curve, meta-features, dataset, hardware and provenance as ``jsonb``, so a row gives
back the whole :class:`KbRun`. ``kb_study_profiles`` keeps each platform study's profile: a run
that completes before its study's profile arrives is stored with ``profile_missing`` and filled
when :meth:`KnowledgeStore.save_profile` gets it.

The schema is versioned with yoyo-migrations (``migrations/kb_*.sql``), re-runnable, and plain SQL
that needs no extension. The store is async (psycopg 3) over a connection pool that checks each
connection before lending it, so a restarted database is reconnected to on the next call.

Usage::

    store = KnowledgeStore(settings.database_url)
    await store.migrate()
    await store.add_run(run)  # False: that run id was already stored
    best = await store.runs(base_model=EMBEDDED_MODEL, task="classification")
    await store.close()
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import Field

from metatune.contracts import Contract, MetaFeatures, StudySpec
from metatune.postgres import Migrations, Postgres

from .files import read_kb_file
from .records import (
    DatasetInfo,
    Hardware,
    KbRun,
    Provenance,
    RunStatus,
    StudyProfile,
    under_licences,
)
from .stats import KbStats, summarize

MIGRATIONS = Migrations("metatune.knowledge")
_DATASET_SUFFIXES = (".gz", ".jsonl", ".json", ".csv", ".parquet", ".txt", ".tsv")

_RUN_COLUMNS = (
    "run_id",
    "study_id",
    "dataset_name",
    "base_model",
    "task",
    "status",
    "stop_reason",
    "source",
    "metric_name",
    "metric",
    "val_loss",
    "majority_baseline",
    "steps",
    "planned_steps",
    "tokens",
    "tokens_with_padding",
    "wall_seconds",
    "train_seconds",
    "gpu_hours",
    "energy_wh",
    "emissions_g",
    "device",
    "gpu_model",
    "gpu_count",
    "datacenter",
    "seed",
    "code_version",
    "profile_missing",
    "config",
    "curve",
    "features",
    "dataset",
    "hardware",
    "provenance",
)
# A run id stored as failed is replaced by a later completion of the same id (a job retried after a
# failure ends as one row with its final outcome); anything else stored stays as it is.
_INSERT_RUN = (
    f"INSERT INTO kb_runs ({', '.join(_RUN_COLUMNS)}) VALUES ({', '.join(['%s'] * len(_RUN_COLUMNS))}) "
    f"ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in _RUN_COLUMNS if c != "run_id")
    + ", updated_at = now() WHERE kb_runs.status = 'failed' AND EXCLUDED.status <> 'failed' RETURNING run_id"
)


_FILL_FROM_PROFILE = (
    "UPDATE kb_runs r SET features = p.features, dataset_name = p.dataset_name, "
    "dataset = jsonb_set(r.dataset, '{name}', to_jsonb(p.dataset_name)), base_model = p.base_model, "
    "task = p.task, profile_missing = false, updated_at = now() "
    "FROM kb_study_profiles p WHERE p.study_id = r.study_id AND r.study_id = %s AND r.profile_missing"
)


class ImportReport(Contract):
    name: str
    runs: int = Field(description="runs in the file")
    added: int = Field(description="runs new to the knowledge base")
    existed: int = Field(description="runs it already held (by run id)")
    torn: bool = Field(False, description="the file's last line was cut short and skipped")
    sources: dict[str, int] = Field(
        default_factory=dict, description="runs of the file per provenance source"
    )


def dataset_name_of(spec: StudySpec) -> str:
    """A platform study's dataset name: the file name of its location without data suffixes."""
    ref = spec.dataset.ref
    if spec.dataset.kind == "url":
        ref = urlsplit(ref).path or ref
    name = PurePosixPath(ref.replace("\\", "/")).name or ref
    for _ in range(3):
        for suffix in _DATASET_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
    return name


def _row_params(run: KbRun) -> tuple[Any, ...]:
    dataset = run.dataset.model_dump(mode="json", exclude={"features"})
    features = run.dataset.features.model_dump(mode="json") if run.dataset.features else None
    hardware = run.hardware
    return (
        run.run_id,
        run.study_id,
        run.dataset.name,
        run.base_model,
        str(run.task),
        run.status.value,
        run.stop_reason,
        run.provenance.source,
        run.metric_name,
        run.metric,
        run.val_loss,
        run.majority_baseline,
        run.steps,
        run.planned_steps,
        run.tokens,
        run.tokens_with_padding,
        run.wall_seconds,
        run.train_seconds,
        run.gpu_hours,
        run.energy_wh,
        run.emissions_g,
        hardware.device if hardware else None,
        hardware.gpu_model if hardware else None,
        hardware.gpu_count if hardware else None,
        run.datacenter,
        run.seed,
        run.provenance.code_version,
        run.profile_missing,
        Jsonb(run.config),
        Jsonb([p.model_dump(mode="json") for p in run.curve]),
        Jsonb(features) if features is not None else None,
        Jsonb(dataset),
        Jsonb(hardware.model_dump(mode="json")) if hardware else None,
        Jsonb(run.provenance.model_dump(mode="json")),
    )


def _run_from_row(row: dict[str, Any]) -> KbRun:
    dataset = dict(row["dataset"])
    dataset["name"] = row["dataset_name"]
    dataset["features"] = row["features"]
    return KbRun(
        run_id=row["run_id"],
        study_id=row["study_id"],
        dataset=DatasetInfo.model_validate(dataset),
        base_model=row["base_model"],
        task=row["task"],
        config=row["config"],
        status=RunStatus(row["status"]),
        stop_reason=row["stop_reason"],
        metric_name=row["metric_name"],
        metric=row["metric"],
        val_loss=row["val_loss"],
        majority_baseline=row["majority_baseline"],
        curve=row["curve"],
        steps=row["steps"],
        planned_steps=row["planned_steps"],
        tokens=row["tokens"],
        tokens_with_padding=row["tokens_with_padding"],
        wall_seconds=row["wall_seconds"],
        train_seconds=row["train_seconds"],
        gpu_hours=row["gpu_hours"],
        energy_wh=row["energy_wh"],
        emissions_g=row["emissions_g"],
        hardware=Hardware.model_validate(row["hardware"]) if row["hardware"] else None,
        datacenter=row["datacenter"],
        seed=row["seed"],
        provenance=Provenance.model_validate(row["provenance"]),
        profile_missing=row["profile_missing"],
    )


class KnowledgeStore(Postgres):
    """Async access to the knowledge base over the platform's PostgreSQL layer
    (:mod:`metatune.postgres`). ``schema``: a PostgreSQL schema of its own (tests), else the
    connection's default (``public``)."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        connect_timeout_s: float = 2.0,
        max_connections: int = 4,
    ) -> None:
        super().__init__(
            url,
            migrations=MIGRATIONS,
            schema=schema,
            max_size=max_connections,
            connect_timeout_s=connect_timeout_s,
            name="metatune-kb",
            wait_s=max(5.0, 3 * connect_timeout_s),
            reconnect_timeout_s=60.0,
        )

    # ----------------------------------------------------------------- runs
    async def add_run(self, run: KbRun) -> bool:
        """Store ``run`` once by run id; False when it was already there (a redelivery, a re-import).
        A stored failure of that id is replaced by a completion."""
        return await self.add_runs([run]) == 1

    async def add_runs(self, runs: Iterable[KbRun]) -> int:
        """Store many runs in one transaction, each once by run id; returns how many were new."""
        params = [_row_params(run) for run in runs]
        if not params:
            return 0
        added = 0
        async with self.connection() as conn, conn.transaction():
            cur = conn.cursor()
            await cur.executemany(_INSERT_RUN, params, returning=True)
            while True:
                added += len(await cur.fetchall())
                if not cur.nextset():
                    break
        return added

    async def runs(
        self,
        *,
        base_model: str | None = None,
        task: str | None = None,
        source: str | None = None,
        include_failed: bool = False,
    ) -> list[KbRun]:
        """Runs matching every filter given, ordered by run id. ``source`` is exact, or a prefix when
        it ends in ``*`` (``public:*``: every imported public table)."""
        where: list[sql.Composable] = []
        params: list[Any] = []
        if base_model is not None:
            where.append(sql.SQL("base_model = %s"))
            params.append(base_model)
        if task is not None:
            where.append(sql.SQL("task = %s"))
            params.append(str(task))
        if source is not None:
            if source.endswith("*"):
                where.append(sql.SQL("starts_with(source, %s)"))
                params.append(source[:-1])
            else:
                where.append(sql.SQL("source = %s"))
                params.append(source)
        if not include_failed:
            where.append(sql.SQL("status <> 'failed'"))
        query = sql.Composed([sql.SQL("SELECT * FROM kb_runs")])
        if where:
            query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where)
        query += sql.SQL(" ORDER BY run_id")
        return [_run_from_row(row) for row in await self.fetch_dicts(query, params)]

    async def run(self, run_id: str) -> KbRun | None:
        rows = await self.fetch_dicts("SELECT * FROM kb_runs WHERE run_id = %s", (run_id,))
        return _run_from_row(rows[0]) if rows else None

    async def study_runs(self, study_id: UUID | str) -> list[KbRun]:
        """Every run of a platform study (failed ones too), in the order they were stored."""
        rows = await self.fetch_dicts(
            "SELECT * FROM kb_runs WHERE study_id = %s ORDER BY stored_at, run_id", (str(study_id),)
        )
        return [_run_from_row(row) for row in rows]

    async def study_run_counts(self, study_ids: Iterable[UUID | str]) -> dict[str, int]:
        """How many runs (failed ones too) each of these platform studies has stored, by study id
        as text; a study with none is 0."""
        ids = list(dict.fromkeys(str(s) for s in study_ids))
        counts = dict.fromkeys(ids, 0)
        if ids:
            rows = await self.fetch(
                "SELECT study_id::text, count(*) FROM kb_runs WHERE study_id = ANY(%s::uuid[]) "
                "GROUP BY 1",
                (ids,),
            )
            counts.update((study, int(n)) for study, n in rows)
        return counts

    # ----------------------------------------------------------------- study profiles
    async def save_profile(
        self,
        study_id: UUID | str,
        spec: StudySpec,
        features: MetaFeatures,
        *,
        profiled_at: datetime | None = None,
    ) -> int:
        """Keep a study's profile (the latest wins) and fill its runs stored without one; returns how
        many runs were filled."""
        name = dataset_name_of(spec)
        async with self.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO kb_study_profiles (study_id, dataset_name, base_model, task, spec, features, "
                "profiled_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (study_id) DO UPDATE SET "
                "dataset_name = EXCLUDED.dataset_name, base_model = EXCLUDED.base_model, task = EXCLUDED.task, "
                "spec = EXCLUDED.spec, features = EXCLUDED.features, profiled_at = EXCLUDED.profiled_at, "
                "stored_at = now()",
                (
                    str(study_id),
                    name,
                    spec.base_model,
                    spec.task.value,
                    Jsonb(spec.model_dump(mode="json")),
                    Jsonb(features.model_dump(mode="json")),
                    profiled_at,
                ),
            )
            cur = await conn.execute(_FILL_FROM_PROFILE, (str(study_id),))
            return cur.rowcount

    async def fill_from_profile(self, study_id: UUID | str) -> int:
        """Fill the study's runs stored without a profile from its stored profile, if there is one
        now; returns how many were filled. (A completion stored while its profile was being saved
        is caught by one of the two: this call after the insert, or save_profile's update.)"""
        async with self.connection() as conn:
            cur = await conn.execute(_FILL_FROM_PROFILE, (str(study_id),))
            return cur.rowcount

    async def profile(self, study_id: UUID | str) -> StudyProfile | None:
        rows = await self.fetch_dicts(
            "SELECT * FROM kb_study_profiles WHERE study_id = %s", (str(study_id),)
        )
        if not rows:
            return None
        row = rows[0]
        return StudyProfile(
            study_id=row["study_id"],
            dataset_name=row["dataset_name"],
            spec=StudySpec.model_validate(row["spec"]),
            features=MetaFeatures.model_validate(row["features"]),
            profiled_at=row["profiled_at"],
        )

    # ----------------------------------------------------------------- files
    async def import_file(self, path: Path | str, licences: Sequence[str] = ()) -> ImportReport:
        """Load a knowledge-base file (``metatune kb build`` output, the shipped seed); idempotent:
        runs already stored (by run id) are left as they are; with ``licences``, only the runs of
        datasets under one of them (:func:`.records.under_licences`). Raises ``KbSchemaMismatch``
        for a file of another schema version, ``KbFileError`` for anything that is not a
        knowledge-base file."""
        path = Path(path)
        kb = await asyncio.to_thread(read_kb_file, path)
        if licences:
            kb = dataclasses.replace(kb, runs=under_licences(kb.runs, licences))
        digest = await asyncio.to_thread(lambda: hashlib.sha256(path.read_bytes()).hexdigest())
        added = await self.add_runs(kb.runs)
        await self.fetch_dicts(
            "INSERT INTO kb_imports (sha256, name, runs, added, header) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (sha256) DO UPDATE SET imported_at = now()",
            (digest, path.name, len(kb.runs), added, Jsonb(kb.header.model_dump(mode="json"))),
        )
        distinct = kb.by_id()
        return ImportReport(
            name=path.name,
            runs=len(distinct),
            added=added,
            existed=len(distinct) - added,
            torn=kb.torn,
            sources=dict(Counter(run.provenance.source for run in distinct.values())),
        )

    # ----------------------------------------------------------------- summary
    async def stats(self) -> KbStats:
        """What the store holds; per dataset, the share of runs beating the baseline and the
        noise between seeds against the spread between configurations (see :mod:`.stats`)."""
        rows = await self.fetch_dicts(
            "SELECT dataset_name, base_model, source, status, metric, majority_baseline, profile_missing, "
            "md5((config - 'seed')::text) AS config_key FROM kb_runs"
        )
        profiles = (await self.fetch_dicts("SELECT count(*) AS n FROM kb_study_profiles"))[0]["n"]
        return summarize(rows, profiles)
