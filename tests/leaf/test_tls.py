"""TLS on the hub's client and leaf-node ports, with a CA made for the test: clients configured
with the CA connect, the leaf node links over TLS, and a client without TLS is refused."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from metatune.bus import HEALTH_BUCKET, ensure_streams
from metatune.bus.connection import client_auth, connect_once
from metatune.bus.leafnodes import TlsFiles
from metatune.contracts import ServiceHealth
from metatune.errors import BusUnavailable
from metatune.service import Service
from metatune.settings import Settings
from tests.support.waiting import wait_for

from .conftest import LeafSite, hub_and_leaf, linked

pytestmark = pytest.mark.integration  # a hub and a leaf nats-server with TLS


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> TlsFiles:
    """A self-signed CA and a server certificate for 127.0.0.1 signed by it (EC keys: quick)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key, cert, key, csr, ext = (
        directory / n
        for n in ("ca.pem", "ca.key", "server.pem", "server.key", "server.csr", "server.ext")
    )
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "1",
        "-subj",
        "/CN=metatune-test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    _openssl("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "1",
        "-extfile",
        str(ext),
    )
    return TlsFiles(ca=ca, cert=cert, key=key)


@pytest.fixture(scope="module")
def tls_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LeafSite, TlsFiles]]:
    directory = tmp_path_factory.mktemp("tls")
    tls = make_certificates(directory / "pki")
    with hub_and_leaf(directory / "nats", tls=tls) as site:
        yield site, tls


async def test_a_client_with_the_ca_connects_over_tls(tls_site: tuple[LeafSite, TlsFiles]) -> None:
    site, tls = tls_site
    settings = Settings(nats_url=site.hub_admin_url, nats_tls_ca_file=tls.ca)
    nc = await connect_once(settings.nats_url, 5.0, **client_auth(settings))
    try:
        assert nc.is_connected and (await nc.jetstream().account_info()) is not None
    finally:
        await nc.close()


async def test_a_service_connects_over_tls(
    tls_site: tuple[LeafSite, TlsFiles], tmp_path: Path
) -> None:
    site, tls = tls_site
    service = Service(
        "tls-probe",
        settings=Settings(nats_url=site.hub_admin_url, nats_tls_ca_file=tls.ca, data_dir=tmp_path),
    )
    async with service.running():
        kv = await service.js.key_value(HEALTH_BUCKET)

        async def heartbeat_written() -> bool:
            with contextlib.suppress(nats.errors.Error):  # no key yet
                return "tls-probe" in await kv.keys()
            return False

        await wait_for(heartbeat_written, "its first heartbeat, written over TLS", timeout=30)
        health = ServiceHealth.model_validate_json((await kv.get("tls-probe")).value)
    assert (health.service, health.instance, health.status) == ("tls-probe", "tls-probe", "ok")


async def test_the_leaf_node_links_to_the_hub_over_tls(tls_site: tuple[LeafSite, TlsFiles]) -> None:
    """The agent logged in to its leaf node sees the hub's JetStream (the streams the admin made
    there) through the link, which is TLS only: the hub refuses plain text."""
    site, tls = tls_site
    settings = site.agent_settings(nats_tls_ca_file=tls.ca)
    admin = Settings(nats_url=site.hub_admin_url, nats_tls_ca_file=tls.ca)
    hub = await nats.connect(admin.nats_url, allow_reconnect=False, **client_auth(admin))
    try:
        await ensure_streams(hub.jetstream(), admin)
        on_hub = await hub.jetstream().account_info()
    finally:
        await hub.close()
    await linked(settings)  # the hub's JetStream answers through the link
    agent = await nats.connect(settings.nats_url, allow_reconnect=False, **client_auth(settings))
    try:
        through_leaf = await agent.jetstream().account_info()
    finally:
        await agent.close()
    assert through_leaf.streams == on_hub.streams >= 1


async def test_a_client_without_tls_is_refused(tls_site: tuple[LeafSite, TlsFiles]) -> None:
    site, _ = tls_site
    with pytest.raises(BusUnavailable):  # no CA configured: the hub's certificate cannot be trusted
        await connect_once(site.hub_admin_url, 2.0)
    assert b"PONG" not in _plain_text_session(site.hub)


def _plain_text_session(address: str) -> bytes:
    """CONNECT and PING in plain text; what the server answered before it closed (bounded)."""
    host, port = address.removeprefix("nats://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        info = sock.makefile("rb").readline()
        assert json.loads(info[5:])["tls_required"]
        sock.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except (TimeoutError, ConnectionError):
            pass
        return received
