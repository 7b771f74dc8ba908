"""A run across several devices: torchrun starts one process per device; the agent steers rank 0.

The agent keeps one code path for every run: :func:`~..domain.run.run_training` with its hooks.
For a job on ``n > 1`` devices, :class:`MultiDeviceRun` (the agent's side) starts PyTorch's own
launcher, ``python -m torch.distributed.run --standalone --nproc-per-node n``, on
:mod:`metatune_trainer_agent.adapters.worker`. Every worker joins the process group (NCCL on
GPUs, gloo on CPUs); rank 0 opens a Unix socket in a private folder (mode 0700) with a random key the agent
passed in its environment, the agent connects, sends the run's arguments, and serves rank 0's
calls for the run's lifetime: the clock, the carbon intensity, progress, checkpoints, the pause /
stop control and the early-stop hook. The outcome (or the exception the run raised) comes back
the same way. Only this authenticated, private channel carries pickled objects.

If the launcher exits without an outcome (a worker crashed, was killed, ran out of memory), the
run fails with the launcher's exit status and the tail of its log; the agent treats that as any
failed session (the job's last checkpoint stays where it was).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from metatune.clock import Clock

from ..domain.carbon import IntensityLookup
from ..domain.errors import TrainingError
from ..domain.request import TrainingRequest
from ..domain.run import RunHooks, RunOutcome, Site, check_split
from .devices import device_for, open_device
from .process_group import ProcessGroup
from .training import run_training

log = logging.getLogger(__name__)

AUTHKEY_ENV = "METATUNE_RUN_AUTHKEY"
SOCKET_NAME = "rank0.sock"
CONNECT_TIMEOUT_S = 600.0  # the workers import torch and load the model before rank 0 listens
POLL_S = 0.2
GROUP_EXIT_S = 10.0  # how long the stopped group may take to be gone (reaped)
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True)
class RunArguments:
    """What every rank needs to start the run (the leader forwards it to the other ranks)."""

    request: TrainingRequest
    site: Site
    resume_from: bytes | None
    planned_hours: float | None
    taken_up: tuple[datetime, float] | None
    simulated: bool


class MultiDeviceRun:
    """Runs :func:`run_training` on ``processes`` devices (the agent's side of the channel)."""

    def __init__(self, processes: int, *, python: str = sys.executable) -> None:
        if processes < 2:
            raise ValueError("a multi-device run needs at least two processes")
        self.processes = processes
        self.python = python

    def __call__(
        self,
        request: TrainingRequest,
        *,
        site: Site,
        clock: Clock,
        intensity: IntensityLookup,
        hooks: RunHooks,
        resume_from: bytes | None = None,
        planned_hours: float | None = None,
        taken_up: tuple[datetime, float] | None = None,
    ) -> RunOutcome:
        check_split(request.config.batch_size, self.processes)  # before any process starts
        device = device_for(request.options.device)
        arguments = RunArguments(
            request, site, resume_from, planned_hours, taken_up, clock.simulated
        )
        with tempfile.TemporaryDirectory(prefix="metatune-run-") as folder:
            address = str(Path(folder) / SOCKET_NAME)
            authkey = secrets.token_bytes(32)
            log_path = Path(folder) / "torchrun.log"
            command = [
                self.python,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc-per-node={self.processes}",
                "-m",
                "metatune_trainer_agent.adapters.worker",
                address,
                device.type,
            ]
            with log_path.open("wb") as output:
                process = subprocess.Popen(
                    command,
                    env={**os.environ, AUTHKEY_ENV: authkey.hex()},
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: torchrun and its workers
                )
                try:
                    conn = _connect(address, authkey, process)
                    with conn:
                        conn.send(arguments)
                        outcome = _serve(conn, process, clock, intensity, hooks)
                    process.wait(timeout=CONNECT_TIMEOUT_S)
                    if outcome is None:
                        raise TrainingError(
                            f"the run on {self.processes} devices ended without an outcome "
                            f"(torchrun exit {process.returncode}): {_tail(log_path)}"
                        )
                    return outcome
                finally:
                    _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """torchrun and every process it started (its elastic agent, the workers), which share its
    process group: asked to stop, then killed, and waited for, so none outlives the run."""
    group = process.pid  # start_new_session: the group's id is torchrun's pid
    if process.poll() is None:
        _signal_group(group, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):  # then killed below
            process.wait(timeout=30)
    _signal_group(group, signal.SIGKILL)  # whatever is left of it, torchrun gone or not
    if process.poll() is None:
        process.wait()
    deadline = time.monotonic() + GROUP_EXIT_S
    while _signal_group(group, 0) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _signal_group(group: int, signum: int) -> bool:
    """Send ``signum`` to the process group; False when no process is left in it."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True


def _connect(address: str, authkey: bytes, process: subprocess.Popen[bytes]) -> Connection:
    """Connect to rank 0 once it listens; fail if the launcher exits (or hangs) first."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise TrainingError(f"torchrun exited with {process.returncode} before rank 0 listened")
        if os.path.exists(address):
            try:
                return Client(address, family="AF_UNIX", authkey=authkey)
            except (ConnectionRefusedError, FileNotFoundError):
                pass  # bound, not yet listening
        if time.monotonic() > deadline:
            raise TrainingError(f"rank 0 did not listen within {CONNECT_TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)


def _serve(
    conn: Connection,
    process: subprocess.Popen[bytes],
    clock: Clock,
    intensity: IntensityLookup,
    hooks: RunHooks,
) -> RunOutcome | None:
    """Answer rank 0's calls until it sends the outcome (or an error, raised here)."""
    handlers: dict[str, Callable[..., Any]] = {
        "now": clock.now,
        "wall_seconds": clock.wall_seconds,
        "intensity": intensity,
        "progress": hooks.on_progress or _nothing,
        "checkpoint": hooks.on_checkpoint or _nothing,
        "control": hooks.control or _nothing,
        "should_stop": hooks.should_stop or _nothing,
    }
    while True:
        if not conn.poll(POLL_S):
            if process.poll() is not None:
                return None
            continue
        try:
            name, args = conn.recv()
        except EOFError:
            return None
        if name == "outcome":
            outcome: RunOutcome = args[0]
            return outcome
        if name == "error":
            raise args[0]
        try:
            conn.send(("ok", handlers[name](*args)))
        except Exception as exc:  # the hook failed: the run sees it as its own error
            failure = TrainingError(f"{name} hook failed: {type(exc).__name__}: {exc}")
            conn.send(("error", failure))


def _nothing(*_: Any) -> None:
    """A hook the caller did not set: no answer."""
    return None


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-LOG_TAIL_CHARS:]


# ----------------------------------------------------------------- the worker's side


class _AgentLink:
    """Rank 0's calls to the agent over the channel."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def call(self, name: str, *args: Any) -> Any:
        self.conn.send((name, args))
        kind, value = self.conn.recv()
        if kind == "error":
            raise value
        return value


class _AgentClock(Clock):
    """The agent's clock (real or simulated), read through the channel."""

    def __init__(self, link: _AgentLink, simulated: bool) -> None:
        self.link = link
        self.simulated = simulated

    def now(self) -> datetime:
        moment: datetime = self.link.call("now")
        return moment

    def wall_seconds(self, duration: timedelta) -> float:
        return float(self.link.call("wall_seconds", duration))


def run_worker(address: str, device_type: str) -> None:
    """One rank of a multi-device run (the body of :mod:`metatune_trainer_agent.adapters.worker`)."""
    authkey = bytes.fromhex(os.environ.pop(AUTHKEY_ENV, ""))
    group = ProcessGroup.from_env(os.environ)
    if not isinstance(group, ProcessGroup):
        raise TrainingError("a rank of a multi-device run starts under torchrun (WORLD_SIZE > 1)")
    device = open_device(device_type, group.local_rank).device
    group.join(device)
    try:
        if group.leader:
            _lead(group, address, authkey)
        else:
            arguments: RunArguments = group.from_leader(None)
            run_training(
                arguments.request,
                site=arguments.site,
                resume_from=arguments.resume_from,
                planned_hours=arguments.planned_hours,
                taken_up=arguments.taken_up,
                group=group,
            )
    finally:
        group.leave()


def _lead(group: ProcessGroup, address: str, authkey: bytes) -> None:
    if not authkey:
        raise TrainingError(f"rank 0 needs the channel's key in {AUTHKEY_ENV}")
    with (
        Listener(address, family="AF_UNIX", authkey=authkey) as listener,
        listener.accept() as conn,
    ):
        arguments: RunArguments = conn.recv()
        group.from_leader(arguments)
        link = _AgentLink(conn)
        hooks = RunHooks(
            on_progress=lambda progress: link.call("progress", progress),
            on_checkpoint=lambda step, data: link.call("checkpoint", step, data),
            control=lambda: link.call("control"),
            should_stop=lambda step, total, evaluations: link.call(
                "should_stop", step, total, evaluations
            ),
        )
        try:
            outcome = run_training(
                arguments.request,
                site=arguments.site,
                clock=_AgentClock(link, arguments.simulated),
                intensity=lambda hour: link.call("intensity", hour),
                hooks=hooks,
                resume_from=arguments.resume_from,
                planned_hours=arguments.planned_hours,
                taken_up=arguments.taken_up,
                group=group,
            )
        except Exception as exc:
            log.exception("rank 0 failed")
            conn.send(("error", (_picklable(exc),)))
            raise
        conn.send(("outcome", (outcome,)))


def _picklable(exc: Exception) -> Exception:
    """``exc`` itself when it survives pickling, else a TrainingError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return TrainingError(f"{type(exc).__name__}: {exc}")
    return exc
