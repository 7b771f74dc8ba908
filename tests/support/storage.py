"""Which storage backend telemetry's tests run against, decided here once, and the private
TimescaleDB server of the ``timescaledb`` leg.

``METATUNE_TEST_STORAGE`` picks the backend:

* ``postgresql`` (default): the configured server (``METATUNE_DATABASE_URL``), plain PostgreSQL,
  so telemetry's migrations choose their declared fallback (partitions, BRIN, rollup tables);
* ``timescaledb``: this session starts a PostgreSQL 15 of its own with the TimescaleDB extension
  that ``../shared/timescaledb`` holds (its ``pg15-tree`` lays the server out under
  ``.metatune/pg15ts``, data in a temporary folder, a free loopback port) and points
  ``METATUNE_DATABASE_URL`` at it, so the migrations build hypertables, continuous aggregates and
  policies. Its job scheduler is off: TimescaleDB's jobs run when a test calls them
  (``CALL run_job(id)``), never behind its back. Each test's schema holds the extension (a
  database holds it once), so this leg runs its tests one at a time (``scripts/test-timescaledb``).

A test that holds for one backend only says so with ``@pytest.mark.storage("timescaledb")`` (or
``"postgresql"``); the other leg deselects it (``pytest_collection_modifyitems`` in
``plugin.py``) and the report's header names the backend.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg

from .servers import free_port

BACKENDS = ("postgresql", "timescaledb")
BACKEND = os.environ.get("METATUNE_TEST_STORAGE", "postgresql")
if BACKEND not in BACKENDS:
    raise ValueError(f"METATUNE_TEST_STORAGE={BACKEND!r}: one of {', '.join(BACKENDS)}")

# The TimescaleDB this leg tests, which compose/docker-compose.yml pins (tests/test_compose_spec.py)
TIMESCALEDB_VERSION = "2.28.3"
POSTGRES_MAJOR = 15
REPO = Path(__file__).resolve().parents[2]
# the prebuilt extension and its pg15-tree script (README.md there)
SHARED = Path(os.environ.get("METATUNE_TIMESCALEDB_DIR", REPO.parent / "shared" / "timescaledb"))
TREE_SCRIPT = SHARED / "pg15-tree"
TREE = REPO / ".metatune" / "pg15ts"
SERVER_USER = "postgres"  # initdb refuses root: as root, the server runs as this user


class Unavailable(Exception):
    """No TimescaleDB server can be started here; the message says why, in one line."""


@dataclass
class PrivateServer:
    url: str
    folder: Path  # the data (folder/data), the log and the socket
    bin: Path
    runner: list[str]  # runs a program as the server's user

    def run(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [*self.runner, str(self.bin / program), "-D", str(self.folder / "data"), *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    def stop(self) -> None:
        self.run("pg_ctl", "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


def _runner() -> list[str]:
    """How to run the server's programs: as ``SERVER_USER`` when we are root, else as ourselves."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser") is None:
        raise Unavailable("running as root and no runuser to start the server as postgres")
    try:
        subprocess.run(["id", "-u", SERVER_USER], capture_output=True, check=True)
    except subprocess.CalledProcessError as exc:
        raise Unavailable(f"running as root and no {SERVER_USER!r} user to run initdb as") from exc
    return ["runuser", "-u", SERVER_USER, "--"]


def _tree() -> Path:
    """The server's ``bin`` folder (``pg15-tree`` copies the system's PostgreSQL 15 once)."""
    if not TREE_SCRIPT.is_file():
        raise Unavailable(f"no {TREE_SCRIPT} (the prebuilt TimescaleDB extension)")
    done = subprocess.run([str(TREE_SCRIPT), str(TREE)], capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise Unavailable(reason)
    return Path(done.stdout.strip().splitlines()[-1])


def start_timescaledb() -> PrivateServer:
    """A fresh PostgreSQL 15 + TimescaleDB on a free loopback port with an empty ``test``
    database; :class:`Unavailable` (one line) where PostgreSQL 15 or the extension is missing."""
    bin_dir, runner = _tree(), _runner()
    folder = Path(tempfile.mkdtemp(prefix="metatune-tsdb-"))
    if runner:
        shutil.chown(folder, SERVER_USER)
    port = free_port()
    server = PrivateServer(f"postgresql://postgres@127.0.0.1:{port}/test", folder, bin_dir, runner)
    options = (
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
        "-c shared_preload_libraries=timescaledb -c timescaledb.telemetry_level=off "
        "-c timescaledb.max_background_workers=0"
    )
    try:
        for program, *args in (
            ("initdb", "-U", "postgres", "--auth=trust", "--no-sync"),
            ("pg_ctl", "-l", str(folder / "server.log"), "-o", options, "-w", "start"),
        ):
            done = server.run(program, *args)
            if done.returncode != 0:
                raise RuntimeError(f"{program} failed: {done.stderr.strip() or done.stdout}")
        with psycopg.connect(server.url.removesuffix("/test") + "/postgres", autocommit=True) as c:
            c.execute("CREATE DATABASE test")
    except BaseException:
        server.stop()
        raise
    return server
