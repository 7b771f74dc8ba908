"""The agent's dataset cache, through a real nats-server: a dataset fetched from the object store is
kept 0600 in a 0700 folder, even under a permissive umask
and in a folder an older agent made open, and the second trial reads the kept file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import nats

from metatune.bus import DATASETS_BUCKET, ObjectStore, ensure_streams
from metatune.contracts import DatasetLocation
from metatune.settings import Settings
from metatune_trainer_agent.adapters.datasets import DatasetFetcher


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_cached_datasets_are_0600_in_a_0700_folder(module_nats: str, tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"text": "confidential", "label": "a"}\n' * 20)
    folder = tmp_path / "agent" / "datasets"
    folder.mkdir(parents=True, mode=0o755)  # as an older agent left it
    folder.chmod(0o755)
    nc = await nats.connect(module_nats)
    umask = os.umask(0o022)
    try:
        settings = Settings(nats_url=module_nats)
        await ensure_streams(nc.jetstream(), settings)
        objects = ObjectStore(nc.jetstream())
        sha = await objects.put_file(DATASETS_BUCKET, "studies/cache/rows.jsonl", data)
        fetcher = DatasetFetcher(
            objects=objects,
            js=nc.jetstream(),
            directory=folder,
            max_bytes=1 << 20,
            settings=settings,
        )
        location = DatasetLocation(kind="object", ref="studies/cache/rows.jsonl", sha256=sha)
        kept = await fetcher.local_path(location)
        again = await fetcher.local_path(location)
    finally:
        os.umask(umask)
        await nc.close()
    assert kept == again and kept.parent == folder and kept.read_bytes() == data.read_bytes()
    assert (mode(kept), mode(folder)) == (0o600, 0o700)
    assert [p.name for p in folder.iterdir()] == [kept.name]  # no partial left beside it
