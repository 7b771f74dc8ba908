"""Secrets of webhook endpoints: rotation with an overlap, and the secrets that sign a delivery.

An endpoint is a webhook URL without credentials or query (:func:`metatune.webhook_seal.bare`),
so the table holds no URL credentials and every study delivering to the same receiver shares its
secrets. Which secrets are live is decided in :func:`..domain.signing.live_secrets`, at the
database's clock (the one retirement times are set by).
"""

from __future__ import annotations

from typing import Any

from metatune.redaction import url_without_credentials

from ...adapters.db import Database
from ..domain import signing

ROTATE_LOCK = "SELECT pg_advisory_xact_lock(1952803944, hashtext(%s))"


async def rotate(db: Database, url: str, overlap_s: float, secret: str | None = None) -> str:
    """Give ``url``'s endpoint a new secret (``secret``, else a generated one) and retire the ones
    it had (the default one, the first time) ``overlap_s`` from now. Returns the new secret."""
    new = secret or signing.new_secret()
    signing.secret_key(new)  # refuses a malformed one without echoing it
    endpoint = url_without_credentials(url)
    async with db.connection() as conn, conn.transaction():
        await conn.execute(ROTATE_LOCK, (endpoint,))
        retiring = await conn.execute(
            "UPDATE webhook_secrets SET retires_at = now() + make_interval(secs => %s) "
            "WHERE endpoint = %s AND (retires_at IS NULL OR retires_at > now() + make_interval(secs => %s))",
            (overlap_s, endpoint, overlap_s),
        )
        if retiring.rowcount == 0:
            had = await (
                await conn.execute("SELECT 1 FROM webhook_secrets WHERE endpoint = %s", (endpoint,))
            ).fetchone()
            if had is None:  # the default secret signed until now: it keeps signing for the overlap
                await conn.execute(
                    "INSERT INTO webhook_secrets (endpoint, secret, retires_at) "
                    "VALUES (%s, NULL, now() + make_interval(secs => %s))",
                    (endpoint, overlap_s),
                )
        await conn.execute(
            "INSERT INTO webhook_secrets (endpoint, secret) VALUES (%s, %s)", (endpoint, new)
        )
    return new


async def secrets_for(db: Database, url: str, default: str) -> list[str]:
    """The secrets that sign a delivery to ``url`` now."""
    rows = await db.fetch(
        "SELECT secret, created_at, retires_at, now() FROM webhook_secrets WHERE endpoint = %s",
        (url_without_credentials(url),),
    )
    keys = [signing.EndpointSecret(secret, made, retires) for secret, made, retires, _ in rows]
    return signing.live_secrets(keys, default, rows[0][3]) if rows else [default]


async def list_endpoints(db: Database) -> list[dict[str, Any]]:
    """Each endpoint's secrets (never the secrets themselves): when made, when retiring."""
    return await db.fetch_dicts(
        "SELECT endpoint, secret IS NULL AS default_secret, created_at, retires_at, "
        "retires_at IS NULL OR retires_at > now() AS live FROM webhook_secrets ORDER BY endpoint, created_at"
    )
