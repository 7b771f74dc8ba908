"""Every integration test talks to a real NATS (JetStream) and a real PostgreSQL.

The configured URLs (METATUNE_NATS_URL / METATUNE_DATABASE_URL, default 127.0.0.1) are used
when they answer; otherwise this session starts embedded servers (the same code path as
`metatune up`) under a temporary directory and stops them at the end. A run of unit tests only
(``-m unit``) starts none. With ``METATUNE_TEST_STORAGE=timescaledb`` (``scripts/test-timescaledb``)
the database is a private PostgreSQL 15 + TimescaleDB this session starts and stops
(``tests/support/storage.py``). Fixtures, options and marker rules live in ``tests/support``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from metatune_cli.embedded import servers
from metatune_cli.embedded.probe import nats_answers_sync, postgres_answers

from .support.servers import free_port, start_secured_nats, stop, wait_until_serving
from .support.storage import BACKEND, PrivateServer, Unavailable, start_timescaledb
from .support.waiting import wait_for_sync

pytest_plugins = ["tests.support.plugin"]

_started: list[subprocess.Popen[bytes]] = []
_timescaledb: PrivateServer | None = None
_tmp: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _tmp, _timescaledb
    nats_url = os.environ.setdefault("METATUNE_NATS_URL", "nats://127.0.0.1:4222")
    db_url = os.environ.setdefault(
        "METATUNE_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    os.environ.setdefault("METATUNE_RETRY_BACKOFF_S", "0.2")
    _tmp = Path(tempfile.mkdtemp(prefix="metatune-tests-"))
    os.environ.setdefault("METATUNE_DATA_DIR", str(_tmp / "data"))
    if (config.getoption("markexpr", "") or "").strip() == "unit":
        return  # unit tests touch no server
    if BACKEND == "timescaledb":  # tests/support/storage.py
        try:
            _timescaledb = start_timescaledb()
        except Unavailable as exc:
            pytest.exit(f"TimescaleDB leg skipped: {exc}", returncode=0)
        db_url = os.environ["METATUNE_DATABASE_URL"] = _timescaledb.url
        # killed (scripts/test's exit, a CI cancel): end as on Ctrl-C, which stops that server
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    if not nats_answers_sync(nats_url, 1.0):
        proc, url = start_secured_nats(_tmp)
        _started.append(proc)
        os.environ["METATUNE_NATS_URL"] = url
        wait_until_serving(url, "the embedded nats-server")
    if not postgres_answers(db_url, 1.0):
        url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
        _started.append(servers.start_postgres(url, _tmp, _tmp))
        os.environ["METATUNE_DATABASE_URL"] = url
        wait_for_sync(lambda: postgres_answers(url, 1.0), "embedded PostgreSQL answering")


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, whose order it keeps otherwise
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest files first: those with a ``long`` test (minutes each), then those with a
    ``slow`` one (chaos included), then the rest, each file's tests kept together. Under
    ``scripts/test``'s parallel workers (a file per worker at a time, in this order: it passes
    ``--no-loadscope-reorder``, since xdist would otherwise queue the files with most tests
    first and the demo's single test last) the long ones start at once and the short ones fill
    the gaps at the end, instead of one worker running the demo alone while the other idles."""
    cost: dict[Path, int] = {}
    for item in items:
        rank = 0 if item.get_closest_marker("long") else 1 if item.get_closest_marker("slow") else 2
        cost[item.path] = min(rank, cost.get(item.path, rank))
    position = {path: i for i, path in enumerate(cost)}
    items.sort(key=lambda item: (cost[item.path], position[item.path]))


def pytest_unconfigure(config: pytest.Config) -> None:
    for proc in reversed(_started):
        stop(proc)
    if _timescaledb is not None:
        _timescaledb.stop()
    if _tmp is not None:
        shutil.rmtree(_tmp, ignore_errors=True)
