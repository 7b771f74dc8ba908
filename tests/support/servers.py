"""Local servers for tests that need one of their own: free ports, nats-server with auth on (as
`metatune up` starts it), a probe that says when a server listens, and a loopback HTTP server."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from metatune.bus.auth import principals
from metatune.bus.credentials import NatsSecrets, generate
from metatune.registry import default_registry
from metatune_cli.embedded import servers
from metatune_cli.embedded.probe import nats_answers_sync

from .waiting import wait_for_sync


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def accepts(address: str) -> bool:
    """A nats-server listens at ``address`` (it sent its INFO): a plain TCP probe, so callable
    from inside an event loop."""
    host, port = address.removeprefix("nats://").rsplit("@", 1)[-1].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5) as sock:
            return sock.recv(4).startswith(b"INFO")
    except OSError:
        return False


TENANTS = ("team-a", "team-b")  # two teams beside the default one, each with its credential


def nats_secrets(directory: Path) -> NatsSecrets:
    return generate(directory / "secrets", principals(default_registry(), tenants=TENANTS))


def start_secured_nats(
    directory: Path, url: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A nats-server with auth on, as `metatune up` starts it (a user per service, agent and
    tenant's submitter (:data:`TENANTS`), credentials under ``directory/secrets``, kept if present); returns the process and
    the admin's URL (user and password in it, so plain ``nats.connect(url)`` works)."""
    store = nats_secrets(directory)
    url = url or f"nats://127.0.0.1:{free_port()}"
    return servers.start_nats(url, directory, directory, auth=store), store.admin_url(url)


def wait_until_serving(url: str, what: str = "nats-server") -> None:
    """Wait until the nats-server at ``url`` listens, then until it lets us in. The login gets a
    generous timeout: with auth on, a loaded machine can take seconds to check a password, and a
    short one would fail every attempt however long we waited."""
    wait_for_sync(lambda: accepts(url), f"{what} listening")
    wait_for_sync(lambda: nats_answers_sync(url, 10.0), f"{what} letting us in")


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A request handler that logs nothing (pytest shows what a test prints)."""

    def log_message(self, *args: object) -> None:
        pass


def serve_http(
    handler: type[http.server.BaseHTTPRequestHandler],
) -> http.server.ThreadingHTTPServer:
    """A threading HTTP server on a free loopback port answering with ``handler``, served from a
    daemon thread; its base URL is :func:`base_url`; ``shutdown()`` stops it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def base_url(server: http.server.HTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextmanager
def nats_server(directory: Path) -> Iterator[str]:
    """A nats-server (JetStream, auth on) of our own: tests that use it see only their own
    streams, consumers and buckets; it yields the admin's URL."""
    directory.mkdir(parents=True, exist_ok=True)
    proc, url = start_secured_nats(directory)
    try:
        wait_until_serving(url, "a private nats-server")
        yield url
    finally:
        stop(proc)
