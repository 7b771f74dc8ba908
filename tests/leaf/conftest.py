"""A hub nats-server (JetStream, auth on) and one datacenter's leaf node linked to it, as
README "Scaling out" deploys them, on loopback ports of their own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from metatune.bus.auth import agent_user
from metatune.bus.connection import client_auth
from metatune.bus.credentials import NatsSecrets
from metatune.bus.leafnodes import TlsFiles, hub_config, leaf_config
from metatune.settings import Settings
from metatune_cli.embedded import servers
from metatune_trainer_agent.settings import AgentSettings
from tests.support.servers import accepts, free_port, nats_secrets, stop
from tests.support.waiting import wait_for, wait_for_sync


@dataclass(frozen=True)
class LeafSite:
    hub: str  # nats://127.0.0.1:port, no credentials
    leaf: str
    datacenter: str
    secrets: NatsSecrets

    @property
    def hub_admin_url(self) -> str:
        return self.secrets.admin_url(self.hub)

    def agent_settings(self, **overrides) -> AgentSettings:
        """The datacenter's agent, logged in to its local leaf node."""
        seed = self.secrets.seed_file(agent_user(self.datacenter))
        return AgentSettings(nats_url=self.leaf, nats_nkey_file=seed, **overrides)


@contextmanager
def hub_and_leaf(
    directory: Path, datacenter: str = "fra1", tls: TlsFiles | None = None
) -> Iterator[LeafSite]:
    store = nats_secrets(directory)
    leaf_port = free_port()
    site = LeafSite(
        f"nats://127.0.0.1:{free_port()}", f"nats://127.0.0.1:{free_port()}", datacenter, store
    )
    hub_conf = store.directory / "hub.conf"
    hub_conf.write_text(hub_config(leaf_port=leaf_port, tls=tls))
    leaf_conf = store.directory / f"leaf-{datacenter}.conf"
    leaf_conf.write_text(
        leaf_config(
            store.leaf_file(agent_user(datacenter)).name,
            [f"nats-leaf://127.0.0.1:{leaf_port}"],
            host="127.0.0.1",
            port=int(site.leaf.rsplit(":", 1)[1]),
            tls=tls,
        )
    )
    procs = [
        servers.start_nats(site.hub, directory, directory, config=hub_conf),
        servers.start_leaf(leaf_conf, directory),
    ]
    try:
        for address in (site.hub, site.leaf):
            wait_for_sync(lambda address=address: accepts(address), f"nats-server at {address}")
        yield site
    finally:
        for proc in procs:
            stop(proc)


async def linked(settings: Settings, timeout_s: float = 30.0) -> None:
    """Wait until the hub's JetStream answers through the leaf (the link is up), bounded."""
    nc = await nats.connect(settings.nats_url, allow_reconnect=False, **client_auth(settings))

    async def hub_answers() -> bool:
        try:
            await nc.jetstream(timeout=1.0).account_info()
        except (nats.errors.Error, nats.js.errors.Error):
            return False
        return True

    try:
        await wait_for(hub_answers, "the leaf linked to the hub", timeout=timeout_s)
    finally:
        await nc.close()


@pytest.fixture
def leaf_site(tmp_path: Path) -> Iterator[LeafSite]:
    with hub_and_leaf(tmp_path / "nats") as site:
        yield site
