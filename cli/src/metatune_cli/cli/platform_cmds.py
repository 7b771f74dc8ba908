"""``metatune up``, ``down`` and ``status``: run the platform on embedded defaults."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.table import Table

from metatune.bus.auth import ADMIN, Streams, principals
from metatune.bus.clock import reset_anchor
from metatune.bus.connection import client_auth
from metatune.bus.credentials import (
    NatsSecrets,
    check_group,
    generate,
    share_with_group,
    tenants_in,
    write_password,
)
from metatune.bus.streams import CLOCK_BUCKET, HEALTH_BUCKET, ensure_streams
from metatune.clock import RealClock, new_anchor
from metatune.contracts import ServiceHealth
from metatune.dashboard_tokens import (
    DEFAULT_OVERLAP,
    tenant_tokens_dir,
    tokens_dir,
    write_tokens,
)
from metatune.errors import BusUnavailable, InputNotAllowed
from metatune.redaction import redact_url
from metatune.tenancy import check_tenant
from metatune.webhook_seal import ensure_keypair, key_file

from ..embedded import servers
from ..embedded.probe import nats_answers, nats_requires_auth, postgres_answers
from ..embedded.supervisor import (
    ManagedProcess,
    RunState,
    alive,
    load_state,
    record,
    run_dir,
    save_state,
    spawn_service,
    state_path,
    stop,
    write_private,
)
from ..platform import ServiceSpec, platform_services
from ..settings import CliSettings
from .connect import bus, fail, unavailable
from .output import JSON_HELP, logs_to_stderr, print_json

console = Console()


def _wait(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise fail(f"{what} did not come up within {timeout_s:.0f} s")


def nats_secrets(
    settings: CliSettings, rotate: bool = False, new_tenants: list[str] | None = None
) -> NatsSecrets:
    """The embedded server's credentials: every user of the registry's datacenters (the
    configured registry's) and of every tenant (those with a credential already, and
    ``new_tenants``), kept across runs (``rotate`` replaces them all)."""
    streams = Streams(events=settings.stream_name, status=settings.status_stream_name)
    directory = settings.resolved_nats_secrets_dir()
    tenants = [*tenants_in(directory), *(new_tenants or [])]
    return generate(directory, principals(settings.registry(), streams, tenants), rotate=rotate)


def _start_nats(settings: CliSettings, started: list[ManagedProcess]) -> tuple[bool, bool]:
    """(embedded, auth): a NATS that answers at the URL is used as it is (with the admin's
    credentials when it asks for some); otherwise we start one with auth on."""
    url, shown = settings.nats_url, redact_url(settings.nats_url)
    requires_auth = nats_requires_auth(url, settings.connect_timeout_s)
    if requires_auth is None:
        console.print(f"NATS: nothing answers at {shown}; starting embedded nats-server (auth on)")
        logs = run_dir(settings)
        proc = servers.start_nats(
            url, settings.resolved_data_dir(), logs, auth=nats_secrets(settings)
        )
        started.append(record(proc, "nats-server", "nats", logs / "nats-server.log"))
        _wait(
            lambda: asyncio.run(nats_answers(url, 0.5, **client_auth(settings, ADMIN))),
            20,
            "embedded NATS",
        )
        return True, True
    if not asyncio.run(
        nats_answers(url, settings.connect_timeout_s, **client_auth(settings, ADMIN))
    ):
        raise fail(
            f"the NATS at {shown} refused our credentials: give the admin's with METATUNE_NATS_USER and "
            "METATUNE_NATS_PASSWORD_FILE (README, Security)"
        )
    if not requires_auth:
        console.print(
            f"[yellow]NATS at {shown} has no authentication: anyone who reaches it may publish and "
            "read everything (README, Security)[/yellow]"
        )
    return False, requires_auth


def _start_infrastructure(
    settings: CliSettings, started: list[ManagedProcess]
) -> tuple[bool, bool, bool]:
    logs = run_dir(settings)
    data = settings.resolved_data_dir()
    nats_embedded, nats_auth = _start_nats(settings, started)
    pg_embedded = not postgres_answers(settings.database_url, settings.connect_timeout_s)
    if pg_embedded:
        console.print(
            f"PostgreSQL: nothing answers at {redact_url(settings.database_url)}; starting embedded PostgreSQL"
        )
        proc = servers.start_postgres(settings.database_url, data, logs)
        started.append(record(proc, "postgres", "postgres", logs / "postgres.log"))
        _wait(lambda: postgres_answers(settings.database_url, 1), 30, "embedded PostgreSQL")
    return nats_embedded, nats_auth, pg_embedded


async def _prepare_bus(settings: CliSettings, simulate: bool) -> None:
    async with bus(settings) as nc:
        js = nc.jetstream()
        await ensure_streams(js, settings)
        if simulate:
            await reset_anchor(js, new_anchor(settings.sim_seconds_per_hour, settings.sim_start))
        else:
            kv = await js.key_value(CLOCK_BUCKET)
            await kv.purge("anchor")


def up(
    simulate: bool = typer.Option(
        False,
        "--simulate",
        help="Simulated clock: an hour passes in METATUNE_SIM_SECONDS_PER_HOUR s",
    ),
    wait: bool = typer.Option(True, help="Wait until every service reports healthy"),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Start the platform: NATS and PostgreSQL (embedded if none answers), then every service."""
    settings = CliSettings()
    with logs_to_stderr(console, json_output):
        existing = load_state(settings)
        if existing and any(alive(p.pid) for p in existing.processes):
            started = _start_missing(settings, existing, simulate, wait)
        else:
            started = _start_all(settings, simulate, wait)
        _report(settings, json_output, started=started)


def _start_all(settings: CliSettings, simulate: bool, wait: bool) -> list[str]:
    """``up`` from nothing: infrastructure (unless it answers), the bus layout, every service."""
    missing = [s.module for s in platform_services(settings) if not s.installed()]
    if missing:
        raise fail(f"services not installed: {', '.join(missing)} (run scripts/install)")
    started: list[ManagedProcess] = []
    database_url, password_file = database_reference(settings)
    ensure_keypair(key_file(settings))  # telemetry's: `submit` seals webhook credentials with it
    state = RunState(
        nats_url=settings.nats_url,
        database_url=database_url,
        database_password_file=password_file,
        nats_embedded=False,
        postgres_embedded=False,
        simulated=simulate,
    )
    try:
        nats_embedded, nats_auth, pg_embedded = _start_infrastructure(settings, started)
        state = state.model_copy(
            update={
                "nats_embedded": nats_embedded,
                "nats_auth": nats_auth,
                "postgres_embedded": pg_embedded,
                "processes": started,
            }
        )
        save_state(settings, state)
        asyncio.run(_prepare_bus(settings, simulate))
        for spec in platform_services(settings):
            started.append(
                spawn_service(
                    spec.instance, spec.module, _service_env(settings, state, spec), settings
                )
            )
            state = state.model_copy(update={"processes": started})
            save_state(settings, state)
    except BaseException:
        stop(started)
        state_path(settings).unlink(missing_ok=True)
        raise
    if wait:
        _wait_healthy(settings, state)
    return [p.name for p in started]


def _service_env(settings: CliSettings, state: RunState, spec: ServiceSpec) -> dict[str, str]:
    """The environment ``up`` gives one service process (``restart`` gives the same)."""
    env = {
        "METATUNE_NATS_URL": state.nats_url,
        "METATUNE_DATABASE_URL": state.database_url,  # without its password: the file has it
        "METATUNE_DATA_DIR": str(settings.resolved_data_dir()),
        "METATUNE_CLOCK": "simulated" if state.simulated else "real",
        "METATUNE_SERVICE_NAME": spec.instance,
    }
    if state.database_password_file is not None:
        env["METATUNE_DATABASE_PASSWORD_FILE"] = state.database_password_file
    if spec.name == "trainer-agent":
        env["METATUNE_DATACENTER"] = spec.instance.split(".", 1)[1]
    if state.nats_embedded:  # our server: each process logs in as its own user (the instance name)
        env["METATUNE_NATS_NKEY_FILE"] = str(
            NatsSecrets(directory=settings.resolved_nats_secrets_dir()).seed_file(spec.instance)
        )
    return env


def database_reference(settings: CliSettings) -> tuple[str, str | None]:
    """The database URL without its password, and the file that holds the password: the one
    settings name, or (a password written into METATUNE_DATABASE_URL) ``run/database.password``,
    owner-only. The run state and the services' environment carry the file's path, never the
    password."""
    parts = urlsplit(settings.database_url)
    if parts.password is None:
        return settings.database_url, None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", "@", 1)))
    if settings.database_password_file is not None:
        return bare, str(settings.database_password_file.resolve())
    path = run_dir(settings) / "database.password"
    write_private(path, unquote(parts.password))
    return bare, str(path)


def _dead_infrastructure(state: RunState) -> list[str]:
    return [p.name for p in state.processes if p.role != "service" and not alive(p.pid)]


def _start_missing(settings: CliSettings, state: RunState, simulate: bool, wait: bool) -> list[str]:
    """``up`` while the platform runs: start only the services that are not running (a crashed one,
    one added to METATUNE_LOCAL_DATACENTERS), leaving the rest alone."""
    dead = _dead_infrastructure(state)
    if dead:
        raise fail(
            f"embedded {', '.join(dead)} of this platform exited while services still run; "
            "run `metatune down`, then `metatune up`"
        )
    if simulate != state.simulated:
        console.print(
            f"[yellow]the platform already runs with the {'simulated' if state.simulated else 'real'} clock; "
            "keeping it (run `metatune down` first to change it)[/yellow]"
        )
    running = {p.name for p in state.processes if p.role == "service" and alive(p.pid)}
    missing = [spec for spec in platform_services(settings) if spec.instance not in running]
    if not missing:
        console.print(
            "the platform is already up; nothing to start (`metatune restart SERVICE` restarts one)"
        )
        return []
    for spec in missing:
        state = _replace_process(
            settings,
            state,
            spawn_service(
                spec.instance, spec.module, _service_env(settings, state, spec), settings
            ),
        )
    console.print(f"started what was missing: {', '.join(spec.instance for spec in missing)}")
    if wait:
        _wait_healthy(settings, state, only={spec.instance for spec in missing})
    return [spec.instance for spec in missing]


def _replace_process(settings: CliSettings, state: RunState, process: ManagedProcess) -> RunState:
    processes = [p for p in state.processes if p.name != process.name] + [process]
    state = state.model_copy(update={"processes": processes})
    save_state(settings, state)
    return state


def restart(
    service: str = typer.Argument(
        ...,
        help="An instance (scheduler, trainer-agent.fra1) or a service name "
        "(trainer-agent: every local agent)",
    ),
    wait: bool = typer.Option(True, help="Wait until the restarted processes report healthy"),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Restart one service (or one agent instance) of the running platform; the rest keep running."""
    settings = CliSettings()
    with logs_to_stderr(console, json_output):
        restarted = _restart(settings, service, wait)
        _report(settings, json_output, restarted=restarted)


def _restart(settings: CliSettings, service: str, wait: bool) -> list[str]:
    state = load_state(settings)
    if state is None:
        raise fail("the platform is not up here: run `metatune up`")
    specs = [spec for spec in platform_services(settings) if service in (spec.instance, spec.name)]
    if not specs:
        known = ", ".join(spec.instance for spec in platform_services(settings))
        raise fail(f"no service {service!r}; one of: {known}")
    dead = _dead_infrastructure(state)
    if dead:
        raise fail(f"embedded {', '.join(dead)} exited: run `metatune down`, then `metatune up`")
    names = {spec.instance for spec in specs}
    stop([p for p in state.processes if p.role == "service" and p.name in names])
    for spec in specs:
        state = _replace_process(
            settings,
            state,
            spawn_service(
                spec.instance, spec.module, _service_env(settings, state, spec), settings
            ),
        )
    console.print(f"restarted: {', '.join(sorted(names))}")
    if wait:
        _wait_healthy(settings, state, only=names)
    return sorted(names)


def _wait_healthy(settings: CliSettings, state: RunState, only: set[str] | None = None) -> None:
    """Until every wanted instance heartbeats from the process we started (its pid, so a heartbeat
    left by the process it replaced does not count)."""
    wanted = only or {s.instance for s in platform_services(settings)}
    pids = {p.name: p.pid for p in state.processes if p.role == "service"}
    deadline = time.monotonic() + settings.up_timeout_s
    healthy: set[str] = set()
    while time.monotonic() < deadline:
        healthy = {
            h.instance
            for h in asyncio.run(_read_health(settings))
            if _fresh(h, settings) and h.pid == pids.get(h.instance, h.pid)
        }
        if wanted <= healthy:
            return
        dead = [
            p.name
            for p in state.processes
            if p.role == "service" and p.name in wanted and not alive(p.pid)
        ]
        if dead:
            raise fail(
                f"service(s) exited during start-up: {', '.join(dead)}; see logs in {run_dir(settings)}"
            )
        time.sleep(0.5)
    raise fail(
        f"not healthy after {settings.up_timeout_s:.0f} s: {', '.join(sorted(wanted - healthy))}"
    )


def down(json_output: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Stop what `metatune up` or `metatune demo` started (and nothing else)."""
    from ..demo.stack import CLI_ENV_FILE, clean, demo_settings

    settings = CliSettings()
    stopped: list[str] = []
    found = False
    for where in (settings, demo_settings(settings)):  # `up`'s platform, then `demo`'s
        state = load_state(where)
        if state is not None:
            found = True
            stopped += stop(state.processes)
            state_path(where).unlink(missing_ok=True)
            (run_dir(where) / "database.password").unlink(missing_ok=True)
            (run_dir(where) / CLI_ENV_FILE).unlink(missing_ok=True)
            if where is not settings:
                clean(settings)  # the demo's servers' data goes; its logs and table stay
    if not found:
        message = "nothing to stop: neither `metatune up` nor `metatune demo` started anything here"
    else:
        message = f"stopped: {', '.join(stopped) or 'nothing was running'}"
    if json_output:
        print_json({"stopped": stopped})
    else:
        console.print(message)


async def _read_health(settings: CliSettings) -> list[ServiceHealth]:
    async with bus(settings) as nc:
        js = nc.jetstream()
        try:
            kv = await js.key_value(HEALTH_BUCKET)
            keys = await kv.keys()
        except Exception:
            return []
        result = []
        for key in keys:
            try:
                entry = await kv.get(key)
            except Exception:
                continue
            if entry.value:
                result.append(ServiceHealth.model_validate_json(entry.value))
        return result


def _fresh(health: ServiceHealth, settings: CliSettings) -> bool:
    return time.time() - health.heartbeat_at < 3 * settings.heartbeat_s + 2


def expected_instances(state: RunState | None, settings: CliSettings) -> list[str]:
    """The service instances this platform runs: those ``up`` (or ``demo``) recorded starting;
    for a state that recorded none, the settings' local datacenters that its registry has (a
    datacenter the deployment does not run is never reported down)."""
    if state is None:
        return []
    recorded = [p.name for p in state.processes if p.role == "service"]
    if recorded:
        return recorded
    known = {dc.name for dc in settings.registry().datacenters}
    return [
        s.instance
        for s in platform_services(settings)
        if s.name != "trainer-agent" or s.instance.split(".", 1)[1] in known
    ]


def _status_rows(settings: CliSettings) -> dict:
    state = load_state(settings)
    health = {h.instance: h for h in asyncio.run(_read_health(settings))}
    expected = expected_instances(state, settings)
    rows = []
    for instance in sorted(set(expected) | set(health)):
        h = health.get(instance)
        rows.append(
            {
                "instance": instance,
                "service": h.service if h else instance.split(".")[0],
                # alive and saying it is well: a forecaster behind the clock is not healthy
                "healthy": bool(h and _fresh(h, settings) and h.status == "ok"),
                "status": (h.status if _fresh(h, settings) else "down") if h else "down",
                "pid": h.pid if h else None,
                "host": h.host if h else None,
                "uptime_s": round(time.time() - h.started_at, 1) if h else None,
                "heartbeat_age_s": round(time.time() - h.heartbeat_at, 1) if h else None,
                "details": h.details if h else {},
            }
        )
    return {
        "nats": {
            "url": redact_url(settings.nats_url),
            "embedded": bool(state and state.nats_embedded),
            "reachable": True,
            "auth": bool(nats_requires_auth(settings.nats_url, settings.connect_timeout_s)),
        },
        "postgres": {
            "url": redact_url(settings.database_url),
            "embedded": bool(state and state.postgres_embedded),
            "reachable": postgres_answers(settings.database_url, settings.connect_timeout_s),
        },
        "simulated_clock": bool(state and state.simulated),
        "services": rows,
    }


def _status_report(settings: CliSettings) -> dict:
    try:
        return _status_rows(settings)
    except BusUnavailable as exc:
        raise unavailable(exc) from None


def _report(settings: CliSettings, json_output: bool, **result: list[str]) -> None:
    """What ``up`` / ``restart`` print at the end: the status tables, or one JSON object of
    ``result`` (the instances started) and the status."""
    if json_output:
        print_json({**result, "status": _status_report(settings)})
    else:
        _print_status(settings, json_output=False)


def _print_status(settings: CliSettings, json_output: bool) -> bool:
    report = _status_report(settings)
    all_healthy = bool(report["services"]) and all(r["healthy"] for r in report["services"])
    if json_output:
        print_json(report)
        return all_healthy
    infra = Table(title="MetaTune infrastructure")
    for col in ("component", "url", "mode", "reachable", "auth"):
        infra.add_column(col)
    for name in ("nats", "postgres"):
        item = report[name]
        auth = (
            (
                "on"
                if item["auth"]
                else "[red]none: anyone who reaches it may publish and read everything[/red]"
            )
            if "auth" in item
            else "-"
        )
        infra.add_row(
            name,
            item["url"],
            "embedded" if item["embedded"] else "external",
            "[green]yes[/green]" if item["reachable"] else "[red]no[/red]",
            auth,
        )
    console.print(infra)
    table = Table(
        title="MetaTune services" + (" (simulated clock)" if report["simulated_clock"] else "")
    )
    for col in ("instance", "state", "pid", "uptime s", "heartbeat age s"):
        table.add_column(col)
    for row in report["services"]:
        table.add_row(
            row["instance"],
            "[green]healthy[/green]" if row["healthy"] else f"[red]{row['status']}[/red]",
            str(row["pid"] or "-"),
            str(row["uptime_s"] or "-"),
            str(row["heartbeat_age_s"] or "-"),
        )
    console.print(table)
    return all_healthy


def secrets(
    rotate: bool = typer.Option(
        False, "--rotate", help="Replace every credential (then restart NATS and the platform)"
    ),
    db_password_file: Path | None = typer.Option(
        None,
        help="Also write a random database password here (compose: compose/secrets/db.password)",
    ),
    token_overlap_hours: float = typer.Option(
        DEFAULT_OVERLAP.total_seconds() / 3600,
        min=0,
        help="With --rotate: hours the previous dashboard token stays valid",
    ),
    group: int | None = typer.Option(
        None,
        "--group",
        min=0,
        metavar="GID",
        help="For compose: the files 0640 and owned by this group (yours: $(id -g)), their folders "
        "0700; compose adds the containers to it (METATUNE_SECRETS_GID). Give it on every run",
    ),
    tenant: list[str] = typer.Option(
        [],
        "--tenant",
        metavar="NAME",
        help="Also a team of its own (repeatable): its NATS credential (submitter.NAME.nk), its "
        "datasets bucket and its dashboard token (tenants/NAME/dashboard.token), which shows only "
        "its studies",
    ),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write NATS credentials (an nkey per service, agent and tenant; the admin's password; the
    server's auth config) to METATUNE_NATS_SECRETS_DIR, and the telemetry dashboard's read-only
    tokens (dashboard.token, the admin's: every study; one per tenant: its own; --rotate keeps the
    previous ones valid for the overlap), mode 0600 (--group: 0640, that group's); prints file
    names, never secrets. A running embedded NATS is told to reload its users."""
    settings = CliSettings()
    with _refused("--tenant"):
        new_tenants = [check_tenant(name) for name in tenant]
    if group is not None:
        with _refused("--group"):
            check_group(group)  # before anything is written
    made = _folders_to_make(db_password_file)
    store = nats_secrets(settings, rotate=rotate, new_tenants=new_tenants)
    tokens, tenants = _write_dashboard_tokens(settings, store, rotate, token_overlap_hours)
    reloaded = _reload_embedded_nats(settings)
    report = SecretsWritten(
        result={
            "directory": str(store.directory),
            "rotated": rotate,
            "files": sorted(p.name for p in store.directory.iterdir() if p.is_file()),
            "tenants": tenants,
            "nats_reloaded": reloaded,
        },
        messages=_ready_messages(store, tokens, tenants, rotate, token_overlap_hours, reloaded),
    )
    if db_password_file is not None:
        report.add(*_write_db_password(db_password_file, rotate=rotate))
    if group is not None:  # compose bind-mounts each file with the host's owner, group and mode
        report.add(*_share_secrets_with_group(store, tokens, db_password_file, group, made))
    report.show(json_output)


@contextmanager
def _refused(option: str) -> Iterator[None]:
    """A value the option may not take (:class:`InputNotAllowed`) as the option's one-line error."""
    try:
        yield
    except InputNotAllowed as exc:
        raise fail(f"{option}: {exc}") from None


def _folders_to_make(db_password_file: Path | None) -> set[Path]:
    """The folders ``secrets`` creates: they hold only secrets, so --group may close them (0700)."""
    if db_password_file is not None and not db_password_file.parent.exists():
        return {db_password_file.parent}
    return set()


def _write_dashboard_tokens(
    settings: CliSettings, store: NatsSecrets, rotate: bool, overlap_hours: float
) -> tuple[Path, list[str]]:
    """Write the admin's dashboard tokens and each tenant's; their folder and the tenants."""
    tokens = tokens_dir(settings)
    tenants = tenants_in(store.directory)
    now, overlap = RealClock().now(), timedelta(hours=overlap_hours)
    for folder in [tokens, *(tenant_tokens_dir(tokens, t) for t in tenants)]:
        write_tokens(folder, now, rotate=rotate, overlap=overlap)
    return tokens, tenants


def _ready_messages(
    store: NatsSecrets,
    tokens: Path,
    tenants: list[str],
    rotate: bool,
    overlap_hours: float,
    reloaded: bool,
) -> list[str]:
    """What ``secrets`` says of the NATS credentials and the dashboard tokens."""
    messages = [
        f"NATS credentials {'rotated' if rotate else 'ready'} in {store.directory} "
        f"({len(list(store.directory.glob('*.nk')))} nkeys, admin password, {store.server_config.name})",
        f"dashboard token {'rotated' if rotate else 'ready'} in {tokens}"
        + (f" (the previous one valid for {overlap_hours:g} h)" if rotate else ""),
    ]
    if tenants:
        messages.append(
            f"tenants: {', '.join(tenants)} (each: {store.directory}/submitter.<tenant>.nk, "
            f"{tokens}/tenants/<tenant>/dashboard.token)"
        )
    if reloaded:
        messages.append("the embedded NATS reloaded its users")
    return messages


def _write_db_password(path: Path, *, rotate: bool) -> tuple[dict, str]:
    """A random database password in ``path`` (kept unless rotating): the result's fields, a line."""
    written = write_password(path, rotate=rotate)
    fields = {"db_password_file": str(path), "db_password_written": written}
    return fields, f"database password {'written to' if written else 'kept in'} {path}"


def _share_secrets_with_group(
    store: NatsSecrets, tokens: Path, db_password_file: Path | None, group: int, made: set[Path]
) -> tuple[dict, str]:
    """Every secret file readable by ``group`` (0640) in folders only the owner opens (0700):
    the result's fields and a line."""
    files = [p for p in sorted(store.directory.iterdir()) if p.is_file()]
    files += [p for p in sorted(tokens.rglob("*")) if p.is_file()]
    if db_password_file is not None:
        files.append(db_password_file)
    with _refused("--group"):
        share_with_group(sorted(set(files)), group, ours={store.directory, tokens, *made})
    shared = len(set(files))
    return {"group": group, "group_readable": shared}, (
        f"{shared} files readable by group {group} (0640), in folders only you may "
        f"open (0700); compose: METATUNE_SECRETS_GID={group}"
    )


@dataclass
class SecretsWritten:
    """What ``secrets`` reports: one JSON object (``result``), or its ``messages``, one a line."""

    result: dict
    messages: list[str]

    def add(self, fields: dict, message: str) -> None:
        self.result |= fields
        self.messages.append(message)

    def show(self, json_output: bool) -> None:
        if json_output:
            print_json(self.result)
        else:
            for message in self.messages:
                console.print(message)


def _reload_embedded_nats(settings: CliSettings) -> bool:
    """Tell the nats-server ``metatune up`` started (if it runs) to read its users again (SIGHUP:
    nats-server reloads its configuration, the included auth.conf with it); True when told."""
    state = load_state(settings)
    if state is None or not state.nats_embedded:
        return False
    told = False
    for process in state.processes:
        if process.role == "nats" and alive(process.pid):
            os.kill(process.pid, signal.SIGHUP)
            told = True
    return told


def bus_init(
    simulate: bool = typer.Option(
        False, "--simulate", help="Start a simulated clock (else real time)"
    ),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Create the streams, KV buckets and object stores, and set the clock, as the admin: services
    run without the right to create them (compose runs this once before the services)."""
    settings = CliSettings()
    simulated = simulate or settings.clock == "simulated"
    try:
        asyncio.run(_prepare_bus(settings, simulated))
    except BusUnavailable as exc:
        raise unavailable(exc) from None
    if json_output:
        print_json(
            {
                "ready": True,
                "nats": redact_url(settings.nats_url),
                "clock": "simulated" if simulated else "real",
                "streams": [settings.stream_name, settings.status_stream_name],
            }
        )
    else:
        console.print("bus layout ready")


def status(json_output: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Show infrastructure and service health; exit 1 when a service is down, 3 when NATS is unreachable."""
    settings = CliSettings()
    if not _print_status(settings, json_output):
        raise typer.Exit(1)
