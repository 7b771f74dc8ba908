"""The webhook outbox: the delivery worker and the operations behind ``metatune webhooks``.

The worker is separate from ingestion: events are stored and acked whatever the receivers do.
It claims due notifications with ``FOR UPDATE SKIP LOCKED`` (several workers never send one
twice at once), at most one in flight per receiver URL, so a receiver that hangs holds one slot
for ``webhook_timeout_s`` and nobody else's deliveries. A claim is a lease: a worker that dies
mid-delivery leaves the row to be claimed again when the lease ends (at-least-once; receivers
de-duplicate by ``webhook-id``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from metatune.errors import DatabaseUnavailable
from metatune.inputs import parse_networks
from metatune.redaction import url_without_credentials

from ...adapters.db import Database
from ...settings import TelemetrySettings
from ..domain import signing
from ..domain.retry import next_attempt_in_s
from .delivery import MAX_REDIRECTS, Outcome, post
from .endpoint_secrets import secrets_for

log = logging.getLogger("metatune.telemetry.webhooks")

CLAIM_SQL = """
SELECT id, url FROM webhook_outbox
WHERE ((state = 'pending' AND next_attempt_at <= now()) OR (state = 'sending' AND lease_until < now()))
  AND NOT (url = ANY(%s))
ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED
"""


@dataclass(frozen=True)
class Claimed:
    id: int
    message_id: str
    url: str
    body: str
    attempts: int


async def signing_secret(db: Database, configured: str) -> str:
    """The default secret (endpoints without secrets of their own): the configured one, else the
    one generated at first use and kept in the database."""
    if configured:
        signing.secret_key(configured)
        return configured
    async with db.connection() as conn:
        await conn.execute(
            "INSERT INTO webhook_keys (secret) VALUES (%s) ON CONFLICT DO NOTHING",
            (signing.new_secret(),),
        )
        row = await (await conn.execute("SELECT secret FROM webhook_keys")).fetchone()
    assert row is not None
    return str(row[0])


class OutboxWorker:
    def __init__(
        self,
        db: Database,
        settings: TelemetrySettings,
        *,
        on_dead: Callable[[Claimed, Outcome], Awaitable[None]] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.db = db
        self.settings = settings
        self.allow = tuple(parse_networks(settings.webhook_allowed_networks))
        self.on_dead = on_dead
        self.poll_s = poll_s
        self._transport = transport
        self._rng = random.Random()
        self._in_flight: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> None:
        secret = None
        timeout = httpx.Timeout(self.settings.webhook_timeout_s)
        async with httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=False,
            transport=self._transport,
            headers={"user-agent": "metatune-webhooks"},
        ) as client:
            try:
                while True:
                    try:
                        secret = secret or await signing_secret(
                            self.db, self.settings.webhook_secret
                        )
                        claimed = await self.claim()
                    except DatabaseUnavailable as exc:
                        log.warning("webhook outbox: %s; retrying", exc)
                        await asyncio.sleep(1.0)
                        continue
                    for row in claimed:
                        task = asyncio.create_task(
                            self._attempt(client, secret, row), name=f"webhook-{row.id}"
                        )
                        self._in_flight[row.url] = task
                        task.add_done_callback(functools.partial(self._forget, row.url))
                    await asyncio.sleep(0.02 if claimed else self.poll_s)
            finally:
                for task in list(self._in_flight.values()):
                    task.cancel()
                await asyncio.gather(*self._in_flight.values(), return_exceptions=True)

    async def claim(self) -> list[Claimed]:
        room = self.settings.webhook_concurrency - len(self._in_flight)
        if room <= 0:
            return []
        lease_s = self.settings.webhook_timeout_s * (MAX_REDIRECTS + 1) + 30
        async with self.db.connection() as conn, conn.transaction():
            rows = await (await conn.execute(CLAIM_SQL, (list(self._in_flight),))).fetchall()
            chosen: dict[str, int] = {}
            for row_id, url in rows:
                if url not in chosen and len(chosen) < room:
                    chosen[url] = row_id
            if not chosen:
                return []
            cur = await conn.execute(
                "UPDATE webhook_outbox SET state = 'sending', attempts = attempts + 1, "
                "lease_until = now() + make_interval(secs => %s) WHERE id = ANY(%s) "
                "RETURNING id, message_id, url, body, attempts",
                (lease_s, list(chosen.values())),
            )
            return [Claimed(*row) for row in await cur.fetchall()]

    def _forget(self, url: str, _done: asyncio.Task[None]) -> None:
        """The URL's delivery ended: its next row may be claimed."""
        self._in_flight.pop(url, None)

    async def _attempt(self, client: httpx.AsyncClient, secret: str, row: Claimed) -> None:
        try:
            secrets = await secrets_for(self.db, row.url, secret)
        except DatabaseUnavailable as exc:  # the lease ends and the row is tried again
            log.warning("webhook %s: its secrets not read (%s)", row.message_id, exc)
            return
        headers = signing.headers(secrets, row.message_id, int(time.time()), row.body)
        outcome = await post(
            client, row.url, row.body, headers, self.allow, self.settings.webhook_max_backoff_s
        )
        try:
            await self.record(row, outcome)
        except DatabaseUnavailable as exc:  # the lease ends and the row is tried again
            log.warning("webhook %s: outcome not recorded (%s)", row.message_id, exc)

    async def record(self, row: Claimed, outcome: Outcome) -> None:
        if outcome.delivered:
            await self.db.fetch(
                "UPDATE webhook_outbox SET state = 'delivered', delivered_at = now(), last_status = %s, "
                "last_error = NULL, lease_until = NULL WHERE id = %s",
                (outcome.status, row.id),
            )
            return
        dead = outcome.permanent or row.attempts >= self.settings.webhook_max_attempts
        if dead:
            await self.db.fetch(
                "UPDATE webhook_outbox SET state = 'dead', last_status = %s, last_error = %s, "
                "lease_until = NULL WHERE id = %s",
                (outcome.status, outcome.error, row.id),
            )
            log.warning(
                "webhook %s to %s dead after %d attempt(s): %s",
                row.message_id,
                url_without_credentials(row.url),
                row.attempts,
                outcome.error,
            )
            if self.on_dead is not None:
                await self.on_dead(row, outcome)
            return
        delay = next_attempt_in_s(
            row.attempts,
            outcome.retry_after_s,
            self.settings.webhook_backoff_s,
            self.settings.webhook_max_backoff_s,
            self._rng,
        )
        await self.db.fetch(
            "UPDATE webhook_outbox SET state = 'pending', last_status = %s, last_error = %s, "
            "lease_until = NULL, next_attempt_at = now() + make_interval(secs => %s) WHERE id = %s",
            (outcome.status, outcome.error, delay, row.id),
        )


# ----------------------------------------------------------------- operator commands
async def list_outbox(
    db: Database, state: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    rows = await db.fetch_dicts(
        "SELECT id, message_id, study_id, event_type, url, state, attempts, next_attempt_at, last_status, last_error, "
        "created_at, delivered_at FROM webhook_outbox WHERE (%s::text IS NULL OR state = %s) ORDER BY id DESC LIMIT %s",
        (state, state, limit),
    )
    for row in rows:
        row["url"] = url_without_credentials(row["url"])
    return rows


async def retry(db: Database, ids: list[int] | None = None, *, all_dead: bool = False) -> int:
    """Put dead (or given) notifications back in the queue with a fresh attempt budget."""
    if all_dead:
        rows = await db.fetch(
            "UPDATE webhook_outbox SET state = 'pending', attempts = 0, next_attempt_at = now() "
            "WHERE state = 'dead' RETURNING id"
        )
    else:
        rows = await db.fetch(
            "UPDATE webhook_outbox SET state = 'pending', attempts = 0, next_attempt_at = now() "
            "WHERE id = ANY(%s) AND state <> 'delivered' RETURNING id",
            (ids or [],),
        )
    return len(rows)
