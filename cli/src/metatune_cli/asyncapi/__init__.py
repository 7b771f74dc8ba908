"""The AsyncAPI 3.0 document of every MetaTune subject, the contract of record for other systems.

Generated from the code: channels and who sends or receives them (:mod:`.catalog`), payload
schemas from the contracts, ``Nats-Msg-Id`` schemes from :mod:`metatune.msgids`, streams from
:mod:`metatune.bus.streams`, examples from real contract instances (:mod:`.examples`).
Regenerate with ``python -m metatune_cli.asyncapi > docs/asyncapi.json`` (a test fails when the
committed file is out of date).
"""

from __future__ import annotations

import json
from typing import Any

from metatune.catalog import CATALOG, Channel
from metatune.settings import Settings

from .document import build


def document() -> dict[str, Any]:
    """The document with the shipped defaults (stream names, registry), whatever the environment says."""
    shipped = Settings.model_construct()
    return build(shipped, shipped.registry())


def render() -> str:
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


__all__ = ["CATALOG", "Channel", "document", "render"]
