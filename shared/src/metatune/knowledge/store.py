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
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.abc import QueryNoTemplate
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import Field

from metatune.contracts import Contract, MetaFeatures, StudySpec
from metatune.errors import DatabaseUnavailable
from metatune.redaction import redact, redact_url

from .errors import KnowledgeBaseError
from .files import read_kb_file
from .records import DatasetInfo, Hardware, KbRun, Provenance, RunStatus, StudyProfile
from .stats import KbStats, summarize

MIGRATIONS_PACKAGE = "metatune.knowledge"
MIGRATIONS_DIR = "migrations"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
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


def yoyo_uri(url: str, schema: str | None = None, connect_timeout_s: float | None = None) -> str:
    """``url`` as yoyo wants it: its psycopg 3 backend, and the schema as a ``schema`` argument."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "postgresql+psycopg"):
        raise KnowledgeBaseError(
            f"METATUNE_DATABASE_URL must be a postgresql:// URL for the knowledge base, not {redact_url(url)!r}"
        )
    query = dict(parse_qsl(parts.query))
    if schema:
        query["schema"] = schema
    if connect_timeout_s and "connect_timeout" not in query:
        query["connect_timeout"] = str(max(1, round(connect_timeout_s)))
    return urlunsplit(
        ("postgresql+psycopg", parts.netloc, parts.path, urlencode(query), parts.fragment)
    )


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


class KnowledgeStore:
    """Async access to the knowledge base. ``schema``: a PostgreSQL schema of its own (tests), else
    the connection's default (``public``)."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        connect_timeout_s: float = 2.0,
        max_connections: int = 4,
    ) -> None:
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise KnowledgeBaseError(
                f"schema name {schema!r}: lower-case letters, digits and _ only"
            )
        self.url = url
        self.schema = schema
        self.connect_timeout_s = connect_timeout_s
        self._max_connections = max_connections
        self._pool: AsyncConnectionPool | None = None
        self._opening = asyncio.Lock()

    # ----------------------------------------------------------------- connections
    def _where(self) -> str:
        return redact_url(self.url)

    def _unavailable(self, exc: Exception) -> DatabaseUnavailable:
        return DatabaseUnavailable(self._where(), redact(str(exc).strip()))

    async def _ensure_schema(self) -> None:
        if self.schema is None:
            return
        try:
            async with await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout_s))
            ) as conn:
                await conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
                )
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    async def _get_pool(self) -> AsyncConnectionPool:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                kwargs: dict[str, Any] = {
                    "autocommit": True,
                    "connect_timeout": max(1, round(self.connect_timeout_s)),
                }
                if self.schema:
                    kwargs["options"] = f"-c search_path={self.schema}"
                pool = AsyncConnectionPool(
                    self.url,
                    kwargs=kwargs,
                    min_size=1,
                    max_size=self._max_connections,
                    open=False,
                    check=AsyncConnectionPool.check_connection,
                    timeout=max(5.0, 3 * self.connect_timeout_s),
                    reconnect_timeout=60.0,
                    name="metatune-kb",
                )
                try:
                    await pool.open(wait=True, timeout=max(5.0, 3 * self.connect_timeout_s))
                except PoolTimeout as exc:
                    await pool.close()
                    raise DatabaseUnavailable(
                        self._where(), "no connection within the timeout"
                    ) from exc
                self._pool = pool
        return self._pool

    async def _fetch(
        self, query: QueryNoTemplate, params: Sequence[Any] = ()
    ) -> list[dict[str, Any]]:
        pool = await self._get_pool()
        try:
            async with pool.connection() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(query, params)
                return await cur.fetchall() if cur.description else []
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._unavailable(exc) from exc

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> KnowledgeStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ----------------------------------------------------------------- schema
    async def migrate(self) -> list[str]:
        """Apply the knowledge base's migrations not yet applied (safe to call at every start, from
        several processes: yoyo's lock serialises them); returns the ids applied now."""
        await self._ensure_schema()
        return await asyncio.to_thread(self._migrate_sync)

    def _migrate_sync(self) -> list[str]:
        from yoyo import get_backend, read_migrations
        from yoyo.exceptions import LockTimeout

        uri = yoyo_uri(self.url, self.schema, self.connect_timeout_s)
        backend = None
        for attempt in range(
            3
        ):  # two processes creating yoyo's own tables at once: one loses, retries
            try:
                backend = get_backend(uri)
                break
            except psycopg.OperationalError as exc:
                raise self._unavailable(exc) from exc
            except psycopg.Error:
                if attempt == 2:
                    raise
        assert backend is not None
        try:
            with resources.as_file(
                resources.files(MIGRATIONS_PACKAGE).joinpath(MIGRATIONS_DIR)
            ) as folder:
                migrations = read_migrations(str(folder))
                try:
                    with backend.lock(timeout=60):
                        todo = backend.to_apply(migrations)
                        backend.apply_migrations(todo)
                except LockTimeout as exc:
                    raise KnowledgeBaseError(f"knowledge-base migrations: {exc}") from exc
                return [migration.id for migration in todo]
        finally:
            backend.connection.close()

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
        pool = await self._get_pool()
        added = 0
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = conn.cursor()
                await cur.executemany(_INSERT_RUN, params, returning=True)
                while True:
                    added += len(await cur.fetchall())
                    if not cur.nextset():
                        break
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._unavailable(exc) from exc
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
        return [_run_from_row(row) for row in await self._fetch(query, params)]

    async def run(self, run_id: str) -> KbRun | None:
        rows = await self._fetch("SELECT * FROM kb_runs WHERE run_id = %s", (run_id,))
        return _run_from_row(rows[0]) if rows else None

    async def study_runs(self, study_id: UUID | str) -> list[KbRun]:
        """Every run of a platform study (failed ones too), in the order they were stored."""
        rows = await self._fetch(
            "SELECT * FROM kb_runs WHERE study_id = %s ORDER BY stored_at, run_id", (str(study_id),)
        )
        return [_run_from_row(row) for row in rows]

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
        pool = await self._get_pool()
        try:
            async with pool.connection() as conn, conn.transaction():
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
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._unavailable(exc) from exc

    async def fill_from_profile(self, study_id: UUID | str) -> int:
        """Fill the study's runs stored without a profile from its stored profile, if there is one
        now; returns how many were filled. (A completion stored while its profile was being saved
        is caught by one of the two: this call after the insert, or save_profile's update.)"""
        pool = await self._get_pool()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(_FILL_FROM_PROFILE, (str(study_id),))
                return cur.rowcount
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._unavailable(exc) from exc

    async def profile(self, study_id: UUID | str) -> StudyProfile | None:
        rows = await self._fetch(
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
    async def import_file(self, path: Path | str) -> ImportReport:
        """Load a knowledge-base file (``metatune kb build`` output, the shipped seed); idempotent:
        runs already stored (by run id) are left as they are. Raises ``KbSchemaMismatch`` for a file
        of another schema version, ``KbFileError`` for anything that is not a knowledge-base file."""
        path = Path(path)
        kb = await asyncio.to_thread(read_kb_file, path)
        digest = await asyncio.to_thread(lambda: hashlib.sha256(path.read_bytes()).hexdigest())
        added = await self.add_runs(kb.runs)
        await self._fetch(
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
        rows = await self._fetch(
            "SELECT dataset_name, base_model, source, status, metric, majority_baseline, profile_missing, "
            "md5((config - 'seed')::text) AS config_key FROM kb_runs"
        )
        profiles = (await self._fetch("SELECT count(*) AS n FROM kb_study_profiles"))[0]["n"]
        return summarize(rows, profiles)

    async def drop_schema(self) -> None:
        """Drop this store's own schema and everything in it (tests); refuses the default schema."""
        if self.schema is None:
            raise KnowledgeBaseError("drop_schema() needs a store created with its own schema")
        await self.close()
        try:
            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                await conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
                )
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
