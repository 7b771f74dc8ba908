"""The demo's closing table read through telemetry's real read API (its app over a real PostgreSQL,
the dashboard token on): the recorded study of the dashboard tests, its figures computed by hand.
No database URL reaches the summary; the knowledge-base count is the one passed in."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from metatune_cli.demo.scenario import demo_registry
from metatune_cli.demo.summary import GRID_SIZE, closing_table

from .scenario import DE, NO, RUN_PUE, RUN_WH, guarded_app, record_dashboard


async def test_the_closing_table_from_telemetrys_read_api(db, tmp_path: Path) -> None:
    s = await record_dashboard(db)
    app, token = guarded_app(db, tmp_path)
    registry = demo_registry()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://telemetry",
        headers={"Authorization": f"Bearer {token}"},
    ) as client:
        (row,) = await closing_table(client, {s.study: "intents-en"}, registry, {str(s.study): 2})
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://telemetry"
        ) as stranger:
            with pytest.raises(httpx.HTTPStatusError, match="401"):
                await closing_table(stranger, {s.study: "intents-en"}, registry, {})
    # two trials ended: one completed (accuracy 0.8, predicted 0.85 ± 0.05, majority 0.85), one
    # early-stopped without an accuracy; only the first metered hours (osl1, NOW + 2 h and + 3 h)
    assert (row.trials, row.completed, row.early_stopped, row.failed) == (2, 2, 1, 0)
    assert (row.best_accuracy, row.best_predicted, row.best_predicted_std) == (0.8, 0.85, 0.05)
    assert row.majority_baseline == 0.85 and row.kb_runs == 2 and row.grid == GRID_SIZE
    assert row.energy_wh == sum(RUN_WH) and row.datacenters == ["osl1"]
    assert row.grid_energy_wh == pytest.approx(GRID_SIZE * sum(RUN_WH))  # one full-length run
    assert row.emissions_g == pytest.approx(0.7 * RUN_PUE * 22.0 + 0.7 * RUN_PUE * 23.0)
    # run now at home: its two metered hours at fra1 from the request's hour, DE's forecast
    fra1, osl1 = registry.get("fra1"), registry.get("osl1")
    assert row.run_now_g == pytest.approx(0.7 * fra1.pue * (DE[0] + DE[1]))
    # greedy: the EU site with a GPU free at once and the fewest grams: osl1, NO's forecast
    assert row.greedy_g == pytest.approx(0.7 * osl1.pue * (NO[0] + NO[1]))
    # both runs ended hours before the study's deadline (a day after NOW)
    assert (row.deadline_met, row.trials_late, row.deadline_cell) == (True, 0, "met")
