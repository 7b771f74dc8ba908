"""The study page in headless Chromium (Debian ``chromium``; CI installs it in scripts/install)
against a real database, served by uvicorn: the charts show the recorded run's hours."""

from __future__ import annotations

import asyncio
import re
import shutil

import pytest
import uvicorn

from metatune.settings import Settings
from metatune_telemetry.adapters.http import create_app

from ..conftest import free_port
from .test_storage import test_disclosure_of_a_recorded_run_equals_hand_computation as record_run  # noqa: F401

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium)")
async def test_study_page_charts_show_data(db) -> None:
    await record_run(db)
    study = (await db.fetch("SELECT study_id FROM studies"))[0][0]
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(db, Settings()), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(100):
            if server.started:
                break
            await asyncio.sleep(0.05)
        proc = await asyncio.create_subprocess_exec(
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"http://127.0.0.1:{port}/studies/{study}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        dom, _ = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        server.should_exit = True
        await task
    page = dom.decode()
    values = [float(v) for v in re.findall(r'class="bar" data-value="([0-9.e+-]+)"', page)]
    # energy: two priced hours and one unpriced (0.6, 0.3, 0.12 kWh); emissions: the two priced hours
    assert sorted(values) == pytest.approx(sorted([0.6, 0.3, 0.12, 0.18, 0.03]))
    assert "unpriced" in page
