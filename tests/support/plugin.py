"""The suite's pytest plugin (registered by ``tests/conftest.py``): the datasets the repository
ships for tests (``tests/support/data``), the fixtures every folder may use, and the rule that
gives each test its kind of marker.

Markers (declared in ``pytest.ini``): every test is exactly one of ``unit`` (pure code, no
server), ``integration`` (real NATS and/or PostgreSQL) or ``chaos`` (fault injection against real
servers, ``tests/chaos``); ``slow`` is set by hand on tests that train a model, profile whole
datasets, drive a browser or otherwise take 14 s or more. The kind is derived here, not written in every module: a test in
``tests/chaos`` is ``chaos`` (and ``slow``); one that uses a server fixture (directly or through another
fixture) or whose module says ``pytestmark = pytest.mark.integration`` is ``integration``;
everything else is ``unit``. ``pytest -m unit`` therefore starts no server (``tests/conftest.py``).
``storage(backend)`` marks a test that holds for one storage backend; the run for the other
deselects it (``tests/support/storage.py``).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import nats
import pytest

from metatune.settings import Settings

from .servers import nats_server
from .storage import BACKEND

REPO = Path(__file__).resolve().parents[2]
KINDS = ("unit", "integration", "chaos")
# Fixtures that are, or open, a real server: a test using one (even indirectly) is integration.
SERVER_FIXTURES = frozenset(
    {
        "module_nats",
        "private_nats",
        "settings",
        "store",  # knowledge base in PostgreSQL
        "schema",  # telemetry's schema in PostgreSQL
        "db",
        "secured",
        "leaf_site",
        "chaos_nats",
    }
)


def pytest_report_header() -> str:
    return f"storage backend: {BACKEND} (METATUNE_TEST_STORAGE, tests/support/storage.py)"


def for_another_backend(item: pytest.Item) -> bool:
    """Not for this run's storage backend (``tests/support/storage.py``): marked for the other
    one or, in the TimescaleDB leg, a test that keeps nothing in telemetry's database (no
    ``schema``), which the plain leg runs alike."""
    if (marker := item.get_closest_marker("storage")) is not None:
        return marker.args[0] != BACKEND
    return BACKEND == "timescaledb" and "schema" not in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if deselected := [item for item in items if for_another_backend(item)]:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not for_another_backend(item)]
    chaos_folder = REPO / "tests" / "chaos"
    for item in items:
        if item.path.is_relative_to(chaos_folder):
            item.add_marker(pytest.mark.chaos)
            item.add_marker(pytest.mark.slow)
        elif item.get_closest_marker("integration") is None and SERVER_FIXTURES & set(
            getattr(item, "fixturenames", ())
        ):
            item.add_marker(pytest.mark.integration)
        kinds = [k for k in KINDS if item.get_closest_marker(k) is not None]
        if not kinds:
            item.add_marker(pytest.mark.unit)
        elif len(kinds) > 1:
            raise pytest.UsageError(f"{item.nodeid}: marked {' and '.join(kinds)}; pick one")


TEST_DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def text_slice() -> Callable[[str, int, Path], Path]:
    """``text_slice(name, rows, path)``: the first ``rows`` rows of the shipped test dataset
    ``tests/support/data/name`` (see its PROVENANCE.md), written to ``path`` as plain JSON lines."""

    def write(name: str, rows: int, path: Path) -> Path:
        source = TEST_DATA / name
        with gzip.open(source, "rt", encoding="utf-8") as fh:
            records = [json.loads(line) for _, line in zip(range(rows), fh, strict=False)]
        path.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
        )
        return path

    return write


@pytest.fixture(scope="module")
def module_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A nats-server (auth on) shared by the tests of one module; yields the admin's URL."""
    with nats_server(tmp_path_factory.mktemp("nats")) as url:
        yield url


@pytest.fixture
def private_nats(tmp_path: Path) -> Iterator[str]:
    """A nats-server of one test alone."""
    with nats_server(tmp_path / "nats") as url:
        yield url


@pytest.fixture
async def settings(module_nats: str) -> AsyncIterator[Settings]:
    """Settings on the module's server, with its streams deleted after each test (so no test
    sees another's messages, whatever the order)."""
    s = Settings(nats_url=module_nats, retry_backoff_s=0.2, heartbeat_s=0.5)
    yield s
    nc = await nats.connect(s.nats_url)
    js = nc.jetstream()
    for info in await js.streams_info():
        await js.delete_stream(info.config.name)
    await nc.close()
