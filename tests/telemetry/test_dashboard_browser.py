"""The dashboard in headless Chromium (Debian ``chromium``; CI installs it in scripts/install)
against a real database, served by uvicorn: every chart shows the recorded data."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvicorn

from metatune.settings import Settings
from metatune_telemetry.adapters.http import create_app
from tests.support.servers import free_port
from tests.support.waiting import wait_for

from .scenario import ACTUAL_KG, BASELINE_KG, DE, PLANNED_KG, record_dashboard
from .test_storage import test_disclosure_of_a_recorded_run_equals_hand_computation as record_run

CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary (apt-get install chromium)"
)

pytestmark = pytest.mark.slow  # drives headless Chromium


@asynccontextmanager
async def serving(db) -> AsyncIterator[str]:
    """The dashboard on a free port; yields its base URL once uvicorn listens."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(db, Settings()),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: server.started or task.done(), "uvicorn listening")
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def dom(url: str) -> str:
    """The page as Chromium rendered it."""
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--dump-dom",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return out.decode()


def numbers(pattern: str, page: str) -> list[float]:
    return [float(v) for v in re.findall(pattern, page)]


@needs_chromium
async def test_study_page_charts_show_data(db) -> None:
    await record_run(db)
    study = (await db.fetch("SELECT study_id FROM studies"))[0][0]
    async with serving(db) as base:
        page = await dom(f"{base}/studies/{study}")
    values = numbers(r'class="bar" data-value="([0-9.e+-]+)"', page)
    # energy: two priced hours and one unpriced (0.6, 0.3, 0.12 kWh); emissions: the two priced hours
    assert sorted(values) == pytest.approx(sorted([0.6, 0.3, 0.12, 0.18, 0.03]))
    assert "unpriced" in page


@needs_chromium
async def test_job_datacenter_and_trial_views_show_data(db) -> None:
    s = await record_dashboard(db)
    async with serving(db) as base:
        job, datacenter, study = [
            await dom(f"{base}{path}")
            for path in (f"/jobs/{s.job}", "/datacenters/fra1", f"/studies/{s.study}")
        ]
    # the Gantt: 2 h run at osl1, the plan's 2 h there, the run-now baseline's 2 h at home
    assert re.findall(
        r'class="gantt-bar ([a-z]+)" data-datacenter="([a-z0-9]+)"[^>]* data-hours="(\d+)"', job
    ) == [("ran", "osl1", "2"), ("planned", "osl1", "2"), ("baseline", "fra1", "2")]
    assert 'class="gantt-mark" data-datacenter="osl1"' in job
    assert numbers(r'class="bar" data-value="([0-9.e+-]+)"', job) == pytest.approx(
        [BASELINE_KG, PLANNED_KG, ACTUAL_KG], rel=1e-5
    )
    # the forecast: the median curve as recorded inside its p10-p90 band
    medians = re.findall(r'class="median" data-label="[^"]*" data-values="([^"]+)"', datacenter)
    assert [[float(v) for v in m.split()] for m in medians] == [DE]
    assert re.search(r'<polygon class="band"[^>]* points="[^"]+"', datacenter)
    # predicted against actual per trial
    assert re.findall(
        r'class="point" data-trial="(\d+)" data-metric="[a-z_]+" data-predicted="([0-9.]+)" '
        r'data-actual="([0-9.]+)"',
        study,
    ) == [("0", "0.85", "0.8"), ("1", "0.4", "0.45")]
