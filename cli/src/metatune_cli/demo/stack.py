"""The demo's own platform: embedded NATS and PostgreSQL on free loopback ports, every service,
and one trainer-agent per demo datacenter, all under ``<data dir>/demo``.

The demo never uses a NATS or PostgreSQL that already answers at the configured URLs: those may
hold someone's work, and the demo needs an empty event log and knowledge base to be the same run
for the same seed. ``metatune down`` stops it (it looks in ``<data dir>/demo`` too).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
from pathlib import Path

from metatune.errors import MetaTuneError
from metatune.settings import Settings, get_settings

from ..embedded.supervisor import alive, load_state, state_path, stop, write_private
from ..settings import CliSettings
from .scenario import DEMO_DATACENTERS, DemoScenario, demo_registry_path

DEMO_FOLDER = "demo"


def demo_data_dir(settings: Settings | None = None) -> Path:
    """Where the demo keeps its servers' data, its logs, datasets and deliveries."""
    return (settings or get_settings()).resolved_data_dir() / DEMO_FOLDER


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DemoAlreadyRunning(MetaTuneError, RuntimeError):
    """A demo platform started earlier still runs."""


def demo_settings(base: Settings) -> Settings:
    """Settings pointing into the demo's folder (where ``down`` finds the demo's run state)."""
    return base.model_copy(update={"data_dir": demo_data_dir(base)})


def prepare(base: Settings, scene: DemoScenario, webhook_secret: str) -> dict[str, str]:
    """Empty the demo folder and return the environment every demo process runs with.

    Refuses while a demo platform from an earlier run is alive (``metatune down`` first)."""
    folder = demo_data_dir(base)
    state = load_state(demo_settings(base))
    if state is not None and any(alive(p.pid) for p in state.processes):
        raise DemoAlreadyRunning(
            f"a demo platform is still running from {folder}: run `metatune down` first"
        )
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return {
        "METATUNE_DATA_DIR": str(folder),
        "METATUNE_NATS_URL": f"nats://127.0.0.1:{free_port()}",
        "METATUNE_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{free_port()}/metatune",
        "METATUNE_NATS_SECRETS_DIR": str(folder / "secrets" / "nats"),
        "METATUNE_REGISTRY_PATH": str(demo_registry_path()),
        "METATUNE_LOCAL_DATACENTERS": json.dumps(list(DEMO_DATACENTERS)),
        "METATUNE_SIM_SECONDS_PER_HOUR": str(scene.seconds_per_hour),
        "METATUNE_SIM_START": scene.sim_start.isoformat(),
        "METATUNE_TELEMETRY_HTTP_PORT": str(free_port()),
        "METATUNE_WEBHOOK_SECRET": webhook_secret,
        "METATUNE_WEBHOOK_ALLOWED_NETWORKS": json.dumps(["127.0.0.1/32"]),
        "METATUNE_WEBHOOK_BACKOFF_S": "1",
        "METATUNE_WEBHOOK_MAX_BACKOFF_S": "10",
        "METATUNE_AGENT_MAX_EVAL_EXAMPLES": str(scene.max_eval_examples),
        "METATUNE_AGENT_PROGRESS_INTERVAL_S": "1",
        "METATUNE_AGENT_CHECKPOINT_EVERY": "10",
        "METATUNE_AGENT_LEASE_S": "10",
        "METATUNE_PROFILER_SEED": str(scene.seed),
        "METATUNE_UP_TIMEOUT_S": "240",
        # two cores for four agents and five services: one thread each, so runs share the CPU
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


# what the CLI needs to reach a running demo (no secret among them: the embedded PostgreSQL
# trusts loopback, the NATS credentials stay in their files under the secrets folder)
CLI_ENV = (
    "METATUNE_DATA_DIR",
    "METATUNE_NATS_URL",
    "METATUNE_DATABASE_URL",
    "METATUNE_NATS_SECRETS_DIR",
    "METATUNE_REGISTRY_PATH",
    "METATUNE_TELEMETRY_HTTP_PORT",
)
CLI_ENV_FILE = "cli.env"


def write_cli_env(env: dict[str, str]) -> Path:
    """The exports that point the CLI at this demo, in ``<demo>/run/cli.env`` (owner-only)."""
    path = Path(env["METATUNE_DATA_DIR"]) / "run" / CLI_ENV_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, "".join(f"export {k}={shlex.quote(env[k])}\n" for k in CLI_ENV))
    return path


def cli_env(base: Settings) -> str | None:
    """The exports of the demo that is running now; None when none is."""
    settings = demo_settings(base)
    state = load_state(settings)
    path = settings.resolved_data_dir() / "run" / CLI_ENV_FILE
    if state is None or not any(alive(p.pid) for p in state.processes) or not path.is_file():
        return None
    return path.read_text()


def apply(env: dict[str, str]) -> CliSettings:
    """Put ``env`` into this process (the services inherit it) and read the settings it gives
    (afresh: ``get_settings`` caches what it read first)."""
    os.environ.update(env)
    get_settings.cache_clear()
    settings = CliSettings()
    if (
        settings.nats_url != env["METATUNE_NATS_URL"]
        or str(settings.resolved_data_dir()) != env["METATUNE_DATA_DIR"]
    ):  # never start services against the servers the user configured
        raise RuntimeError("the demo's settings did not take effect")
    return settings


KEPT = ("run", "summary.json")  # what `down` leaves of a demo: the logs and the closing table


def clean(base: Settings) -> None:
    """After the demo platform stopped: remove its servers' data, datasets, credentials and
    caches from the demo folder, keeping the logs and the closing table."""
    folder = demo_data_dir(base)
    if not folder.is_dir():
        return
    for child in folder.iterdir():
        if child.name in KEPT:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def stop_instance(settings: Settings, instance: str) -> list[str]:
    """Stop one process of the demo's platform (SIGTERM: it shuts down cleanly)."""
    state = load_state(settings)
    if state is None:
        return []
    return stop([p for p in state.processes if p.name == instance])


def stop_platform(settings: Settings) -> list[str]:
    """Stop what the demo started (its run state), as ``metatune down`` does."""
    state = load_state(settings)
    if state is None:
        return []
    stopped = stop(state.processes)
    state_path(settings).unlink(missing_ok=True)
    (settings.resolved_data_dir() / "run" / CLI_ENV_FILE).unlink(missing_ok=True)
    return stopped
