"""What ``metatune up`` started, so ``metatune down`` stops exactly that and nothing else.

The run state (one JSON file under the data dir) lists each process we started with its pid
and process group; external NATS / PostgreSQL we merely used are never recorded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from pydantic import Field

from metatune.contracts import Contract
from metatune.settings import Settings


class ManagedProcess(Contract):
    name: str
    pid: int
    pgid: int
    command: list[str]
    log: str
    role: str = Field(description="nats | postgres | service")


class RunState(Contract):
    nats_url: str
    database_url: str = Field(description="the database URL without its password")
    database_password_file: str | None = Field(
        None, description="file holding the database password (never the password itself)"
    )
    nats_embedded: bool
    nats_auth: bool = Field(False, description="the NATS in use asks for credentials")
    postgres_embedded: bool
    simulated: bool
    processes: list[ManagedProcess] = Field(default_factory=list)


def run_dir(settings: Settings) -> Path:
    path = settings.resolved_data_dir() / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_path(settings: Settings) -> Path:
    return run_dir(settings) / "state.json"


def load_state(settings: Settings) -> RunState | None:
    path = state_path(settings)
    if not path.exists():
        return None
    return RunState.model_validate_json(path.read_text())


def save_state(settings: Settings, state: RunState) -> None:
    """Written owner-only (0600), atomically: it names processes, URLs and secret files."""
    path = state_path(settings)
    tmp = path.with_suffix(".tmp")
    write_private(tmp, state.model_dump_json(indent=2))
    tmp.replace(path)


def write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable and writable by its owner only (0600) from the start."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def alive(pid: int) -> bool:
    """Running, and not a zombie (an exited process nobody reaped yet counts as stopped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def record(proc: subprocess.Popen[bytes], name: str, role: str, log: Path) -> ManagedProcess:
    return ManagedProcess(
        name=name,
        pid=proc.pid,
        pgid=os.getpgid(proc.pid),
        command=[str(a) for a in proc.args] if isinstance(proc.args, list) else [str(proc.args)],
        log=str(log),
        role=role,
    )


def spawn_service(
    name: str, module: str, env: dict[str, str], settings: Settings, args: list[str] | None = None
) -> ManagedProcess:
    log = run_dir(settings) / f"{name}.log"
    command = [sys.executable, "-m", module, *(args or [])]
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            command,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
    return record(proc, name, "service", log)


def stop(processes: list[ManagedProcess], grace_s: float = 15.0) -> list[str]:
    """SIGTERM each process group (services first, servers last), then SIGKILL stragglers."""
    order = sorted(processes, key=lambda p: {"service": 0, "postgres": 1, "nats": 2}[p.role])
    stopped: list[str] = []
    for group in ("service", "postgres", "nats"):
        batch = [p for p in order if p.role == group]
        for proc in batch:
            if alive(proc.pid):
                _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while any(alive(p.pid) for p in batch) and time.monotonic() < deadline:
            time.sleep(0.1)
        for proc in batch:
            if alive(proc.pid):
                _signal_group(proc, signal.SIGKILL)
            stopped.append(proc.name)
    return stopped


def _signal_group(proc: ManagedProcess, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(proc.pgid, sig)
