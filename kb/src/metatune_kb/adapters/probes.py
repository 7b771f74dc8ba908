"""Fill the label probe (``MetaFeatures.probe_accuracy``) into knowledge-base files built before it.

The probe is a meta-feature the profiler measures on a dataset's own rows, so a file built without
it can only gain it from the datasets themselves: each dataset a run names is profiled again from
``data_dir`` (``<name>.jsonl.gz`` or ``<name>.jsonl``, as ``scripts/kb-data`` writes them) by the
profiler's own code with its default options, the probe copied into every run of that dataset, and
the file rewritten atomically. Nothing else in a row changes (a file that predates the budget
field is written with the budget its loader derives).
"""

from __future__ import annotations

from pathlib import Path

from metatune.knowledge.files import repair_kb_file, write_kb_file
from metatune.knowledge.records import KbRun

from .kb_file import BuildError
from .profiles import profile_dataset


def dataset_probe(data_dir: Path, name: str, pair: bool, base_model: str) -> float | None:
    """The probe of dataset ``name`` in ``data_dir``, as the profiler measures it for a study."""
    found = [data_dir / f"{name}{ext}" for ext in (".jsonl.gz", ".jsonl")]
    path = next((p for p in found if p.is_file()), None)
    if path is None:
        raise BuildError(f"dataset {name!r} is not in {data_dir} (no {name}.jsonl[.gz])")
    return profile_dataset(path, base_model, pair).probe_accuracy


def fill_probes(kb_path: Path, data_dir: Path, *, again: bool = False) -> dict[str, float | None]:
    """Give every run of ``kb_path`` whose dataset lacks a probe (every run, with ``again``) its
    dataset's probe; returns the probe of each dataset measured. Runs without profiled features
    are left as they are."""
    kb = repair_kb_file(kb_path)
    read_as = _stamp(kb_path)
    wanted: dict[str, KbRun] = {}
    for run in kb.runs:
        features = run.dataset.features
        if features is not None and (again or features.probe_accuracy is None):
            wanted.setdefault(run.dataset.name, run)
    probes = {
        name: dataset_probe(
            data_dir,
            name,
            bool(run.dataset.features and run.dataset.features.is_pair),
            run.base_model,
        )
        for name, run in sorted(wanted.items())
    }
    if probes:
        if _stamp(kb_path) != read_as:  # a build appended while the datasets were profiled
            raise BuildError(
                f"{kb_path} changed while its datasets were probed (a build still writing it?): "
                "nothing written; run kb probe again once it stops"
            )
        write_kb_file(kb_path, kb.header, (_with_probe(run, probes) for run in kb.runs))
    return probes


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_size, status.st_mtime_ns


def _with_probe(run: KbRun, probes: dict[str, float | None]) -> KbRun:
    features = run.dataset.features
    if features is None or run.dataset.name not in probes:
        return run
    dataset = run.dataset.model_copy(
        update={
            "features": features.model_copy(update={"probe_accuracy": probes[run.dataset.name]})
        }
    )
    return run.model_copy(update={"dataset": dataset})


__all__ = ["dataset_probe", "fill_probes"]
