"""A nats-server with auth on, as `metatune up` starts it, and clients that log in as one user each
(fixtures `secured` and `admin`, shared by the security tests and the client's)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import TypeVar

import nats
import pytest
from nats.aio.client import Client
from nats.js.errors import NoStreamResponseError

from metatune.bus import ensure_streams
from metatune.bus.connection import client_auth
from metatune.bus.credentials import NatsSecrets
from metatune.settings import Settings
from tests.support.servers import nats_secrets, start_secured_nats, stop, wait_until_serving

S = TypeVar("S", bound=Settings)

# what a refused publish or read looks like to the client: no answer, or no stream answering
REFUSED = (nats.errors.TimeoutError, NoStreamResponseError)
FRA1, OSL1 = "trainer-agent.fra1", "trainer-agent.osl1"  # two agents' users


class SecuredBus:
    def __init__(self, address: str, admin_url: str, secrets: NatsSecrets) -> None:
        self.address, self.admin_url, self.secrets = address, admin_url, secrets

    def settings(self, user: str, kind: type[S] = Settings, **overrides) -> S:
        """Settings of a process that logs in as ``user`` (its nkey file, no credentials in the
        URL); ``kind``: a service's settings class, for overrides of its own fields."""
        return kind(nats_url=self.address, nats_nkey_file=self.secrets.seed_file(user), **overrides)

    @asynccontextmanager
    async def client(
        self, user: str, errors: list[Exception] | None = None
    ) -> AsyncIterator[Client]:
        """A connection as ``user``; the server's asynchronous refusals land in ``errors``."""

        async def on_error(exc: Exception) -> None:
            if errors is not None:
                errors.append(exc)

        nc = await nats.connect(
            self.address,
            error_cb=on_error,
            connect_timeout=2,
            allow_reconnect=False,
            **client_auth(self.settings(user)),
        )
        try:
            yield nc
        finally:
            await nc.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBus]:
    directory = tmp_path_factory.mktemp("secured-nats")
    proc, admin_url = start_secured_nats(directory)
    try:
        wait_until_serving(admin_url, "the secured nats-server")
        address = "nats://" + admin_url.rsplit("@", 1)[1]
        yield SecuredBus(address, admin_url, nats_secrets(directory))
    finally:
        stop(proc)


@pytest.fixture
async def admin(secured: SecuredBus) -> AsyncIterator[Client]:
    """The admin's connection, streams in place; afterwards every stream (buckets included) is
    deleted with its consumers, so no test finds a durable another test made, in any order."""
    nc = await nats.connect(secured.admin_url)
    js = nc.jetstream()
    await ensure_streams(js, Settings(nats_url=secured.admin_url))
    try:
        yield nc
    finally:
        for info in await js.streams_info():
            await js.delete_stream(info.config.name)
        await nc.close()


def violation(errors: list[Exception], subject: str) -> Callable[[], bool]:
    """The server said ``Permissions Violation`` for ``subject``."""
    return lambda: any(
        "permissions violation" in str(e).lower() and subject.lower() in str(e).lower()
        for e in errors
    )
