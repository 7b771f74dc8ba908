"""Which tenant a study belongs to, as telemetry recorded its submission (``studies.spec``).

A study submitted before tenants existed has no ``tenant`` in its spec: it is the default
tenant's (:data:`metatune.tenancy.DEFAULT_TENANT`), as its submission would be today.
"""

from __future__ import annotations

from uuid import UUID

from metatune.tenancy import DEFAULT_TENANT

from ...adapters.db import Database

TENANT_OF = "coalesce(spec->>'tenant', %s)"


async def study_tenant(db: Database, study_id: UUID) -> str | None:
    """The tenant of ``study_id``; None when telemetry has no such study."""
    rows = await db.fetch(
        f"SELECT {TENANT_OF} FROM studies WHERE study_id = %s", (DEFAULT_TENANT, study_id)
    )
    return str(rows[0][0]) if rows else None


async def studies_of(db: Database, tenant: str) -> set[UUID]:
    """The ids of every study of ``tenant``."""
    rows = await db.fetch(
        f"SELECT study_id FROM studies WHERE {TENANT_OF} = %s", (DEFAULT_TENANT, tenant)
    )
    return {row[0] for row in rows}


__all__ = ["studies_of", "study_tenant"]
