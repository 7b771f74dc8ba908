"""The Grafana dashboard's SQL runs against the real telemetry schema (a renamed column would
break a panel silently in Grafana)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = (
    Path(__file__).resolve().parents[2]
    / "compose"
    / "grafana"
    / "dashboards"
    / "metatune-telemetry.json"
)


def plain_sql(sql: str) -> str:
    """Grafana macros replaced by what they expand to."""
    sql = re.sub(r"\$__timeFilter\((\w+)\)", r"\1 > now() - interval '1 day'", sql)
    return re.sub(r"\$__timeGroupAlias\((\w+), '(\w+)'\)", r"date_trunc('minute', \1) AS time", sql)


async def test_every_panel_query_runs(db) -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert {p["title"].split(" (")[0] for p in panels} >= {
        "Training loss",
        "Tokens/s",
        "Consumer lag",
        "Webhook backlog",
    }
    for panel in panels:
        for target in panel["targets"]:
            await db.fetch(plain_sql(target["rawSql"]), None)
