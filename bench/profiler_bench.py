"""Profiler benchmark: streaming ``profile_file`` vs its row-at-a-time reference and a naive pandas
baseline on a large JSON-lines file.

The file is built under ``--work-dir`` (default /tmp/metatune-profiler-bench, never the
repository) by cycling through every ``*.jsonl.gz`` dataset of ``--data`` (a folder laid out like
../shared/data/text: JSON lines with a ``text`` field, optionally ``text_pair`` and ``label``);
files without a usable ``text`` are listed as skipped. The built file's name carries a digest of
the sources, so another folder never reuses it. Each contender runs in its own subprocess so peak
RSS (getrusage ru_maxrss) is its own; RSS right after loading the tokenizer is reported too, since
importing torch/transformers costs the same in both. ``--json`` prints one object with the figures.

Contenders: ``streaming`` is ``profile_file`` with its blocks counted in worker processes (one per
usable core) and merged in order; ``streaming-1`` is the same pass in one process (column batches,
pyarrow JSON blocks, words as ids, a read-ahead thread: the code before the workers);
``reference`` is ``profile_file_by_rows`` (one row and one word string at a time, the code path
``profile_file`` had before the batches) on the same files, and every pair of streaming and
reference runs on one file is checked for identical features (``comparisons``); ``pandas`` loads the
whole file first (``--baseline-size-mb`` only).

    nice python bench/profiler_bench.py --data $DATA/text --size-mb 1024 --baseline-size-mb 128
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import progress

SAMPLE_SIZE = 4096


def sources(data: Path) -> tuple[list[Path], list[str]]:
    """The datasets of ``data`` to cycle through, and the files left out with the reason."""
    used, skipped = [], []
    for source in sorted(data.glob("*.jsonl.gz")):
        try:
            with gzip.open(source, "rt", encoding="utf-8") as fh:
                first = json.loads(fh.readline() or "{}")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            skipped.append(f"{source.name}: unreadable ({type(exc).__name__}: {exc})")
            continue
        if not isinstance(first, dict) or not isinstance(first.get("text"), str):
            skipped.append(f"{source.name}: no string 'text' field in the first row")
            continue
        used.append(source)
    others = sorted(
        p.name for p in data.iterdir() if p.is_file() and not p.name.endswith(".jsonl.gz")
    )
    skipped += [
        f"{name}: not a .jsonl.gz dataset"
        for name in others
        if not name.lower().startswith("readme")
    ]
    return used, skipped


def build_file(files: list[Path], size_mb: int, work_dir: Path) -> Path:
    """``size_mb`` MiB of {"text", "label"} rows from ``files``, cycled (rows without text skipped)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    for source in files:
        digest.update(source.name.encode() + source.read_bytes())
    path = work_dir / f"text_{size_mb}mb_{digest.hexdigest()[:12]}.jsonl"
    target = size_mb * 1024**2
    if path.exists() and path.stat().st_size >= target:
        return path
    lines: list[bytes] = []
    for source in files:
        with gzip.open(source, "rt", encoding="utf-8") as fh:
            for line in fh:
                record = json.loads(line)
                if not isinstance(record.get("text"), str) or not record["text"]:
                    continue
                text = record["text"] + (
                    " " + record["text_pair"] if record.get("text_pair") else ""
                )
                label = f"{source.name.split('.')[0]}:{record.get('label', 'lm')}"
                lines.append(
                    (json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n").encode()
                )
    if not lines:
        raise SystemExit("no rows with text in the datasets")
    written = 0
    with open(path, "wb") as out:
        while written < target:
            for line in lines:
                out.write(line)
                written += len(line)
                if written >= target:
                    break
    return path


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_streaming(path: Path, *, by_rows: bool = False, workers: int | None = None) -> dict:
    """``workers`` None: the usable cores; 1: in this process."""
    from metatune_profiler.adapters.block_pool import ProcessBlockMap, usable_cores
    from metatune_profiler.adapters.files import profile_file, profile_file_by_rows
    from metatune_profiler.adapters.tokenizer import load_tokenizer
    from metatune_profiler.domain.profile import ProfileOptions

    load_tokenizer(ProfileOptions().base_model)
    ready = _rss_mb()
    start = time.perf_counter()
    cpu = time.process_time()
    options = ProfileOptions(sample_size=SAMPLE_SIZE)
    count = workers or usable_cores()
    if by_rows:
        result = profile_file_by_rows(path, options)
    else:
        blocks = ProcessBlockMap(count) if count > 1 else None
        result = profile_file(path, options, map_blocks=blocks)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu + children.ru_utime + children.ru_stime,
        "workers": 1 if by_rows else count,
        "rss_ready_mb": ready,
        "peak_rss_mb": _rss_mb(),
        "worker_peak_rss_mb": children.ru_maxrss / 1024,
        "n_examples": result.features.n_examples,
        "ttr": result.features.ttr,
        "mattr": result.features.mattr,
        "zipf_alpha": result.features.zipf_alpha,
        "features": result.model_dump(mode="json"),
    }


def run_reference(path: Path) -> dict:
    return run_streaming(path, by_rows=True)


def run_one_process(path: Path) -> dict:
    return run_streaming(path, workers=1)


def compare(streaming: dict, reference: dict) -> dict:
    """Whether two runs' profiles (features, skips, columns) are equal, and the fields that differ."""
    a, b = streaming["features"], reference["features"]
    differing = {
        key: {"streaming": a["features"].get(key), "reference": b["features"].get(key)}
        for key in sorted(set(a["features"]) | set(b["features"]))
        if a["features"].get(key) != b["features"].get(key)
    }
    differing |= {
        key: {"streaming": a.get(key), "reference": b.get(key)}
        for key in sorted(set(a) | set(b))
        if key != "features" and a.get(key) != b.get(key)
    }
    return {"identical_features": not differing, "differing": differing}


def run_pandas(path: Path) -> dict:
    """Load everything, then compute the same features from in-memory columns."""
    from collections import Counter

    import pandas as pd

    from metatune_profiler.adapters.tokenizer import load_tokenizer
    from metatune_profiler.domain import stats
    from metatune_profiler.domain.lexicon import Mattr, TypeCounter, words
    from metatune_profiler.domain.profile import ProfileOptions
    from metatune_profiler.domain.rows import Row
    from metatune_profiler.domain.scripts import script_counts, script_mix
    from metatune_profiler.domain.tokenizer import count_tokens
    from metatune_profiler.domain.zipf import fit_discrete_power_law

    tokenizer = load_tokenizer(ProfileOptions().base_model)
    ready = _rss_mb()
    start = time.perf_counter()
    frame = pd.read_json(path, lines=True, dtype={"text": str, "label": str})
    tokens = frame["text"].map(words)
    lengths = tokens.map(len)
    all_tokens = [t for row in tokens for t in row]
    types = TypeCounter(10**9)
    types.update(all_tokens)
    mattr = Mattr(500)
    mattr.update(all_tokens)
    labels = Counter(frame["label"].value_counts().to_dict())
    duplicate_rate = float(frame["text"].duplicated().mean())
    mix = script_mix(script_counts("".join(frame["text"])))
    sample = frame.sample(n=min(SAMPLE_SIZE, len(frame)), random_state=0)
    counted = count_tokens(tokenizer, [Row(i, t, None, None) for i, t in enumerate(sample["text"])])
    fit = fit_discrete_power_law(types.frequency_of_frequencies())
    summary = {
        "entropy": stats.label_entropy_bits(labels),
        "words_p95": float(lengths.quantile(0.95)),
        "mattr": mattr.value(types.ttr()),
        "dup": duplicate_rate,
        "mix": mix,
        "fertility": counted.fertility,
        "padding": stats.padding_fraction_random(counted.lengths, 32, 0),
    }
    return {
        "seconds": time.perf_counter() - start,
        "rss_ready_mb": ready,
        "peak_rss_mb": _rss_mb(),
        "n_examples": len(frame),
        "ttr": types.ttr(),
        "zipf_alpha": fit.alpha if fit else None,
        "checksum": len(json.dumps(summary, default=str)),
    }


def _above_load(result: dict) -> float:
    return result["peak_rss_mb"] - result["rss_ready_mb"]


RUNNERS = {
    "streaming": run_streaming,
    "streaming-1": run_one_process,
    "reference": run_reference,
    "pandas": run_pandas,
}


def _in_subprocess(kind: str, path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", kind, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# long: the bench's protocol in order, one block per step of its docstring
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="a folder laid out like ../shared/data/text (*.jsonl.gz with a 'text' field)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path("/tmp/metatune-profiler-bench"),
        help="where the large file is built",
    )
    parser.add_argument(
        "--size-mb",
        type=int,
        nargs="+",
        default=[1024],
        help="file sizes (MiB) for the streaming and reference contenders",
    )
    parser.add_argument(
        "--baseline-size-mb", type=int, default=256, help="file size for the pandas baseline"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object with the figures (progress to stderr)",
    )
    parser.add_argument("--worker", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(RUNNERS[args.worker](args.path)))
        return

    from rich.console import Console
    from rich.table import Table

    if args.data is None:
        parser.error("--data is required (a folder laid out like ../shared/data/text)")
    if not args.data.is_dir():
        parser.error(f"--data {args.data} is not a folder")
    files, skipped = sources(args.data.resolve())
    for line in skipped:
        Console(stderr=True).print(f"[yellow]skipped[/yellow] {line}")
    if not files:
        parser.error(f"no usable *.jsonl.gz dataset in {args.data}")
    contenders = ("streaming", "streaming-1", "reference")
    runs = [(kind, size) for size in args.size_mb for kind in contenders]
    runs += [("streaming", args.baseline_size_mb), ("pandas", args.baseline_size_mb)]
    runs = list(dict.fromkeys(runs))
    results = {}
    profiles = {}
    for kind, size in progress(runs, "runs"):
        path = build_file(files, size, args.work_dir)
        result = _in_subprocess(kind, path) | {"mb": path.stat().st_size / 1024**2}
        if "features" in result:
            profiles[kind, size] = result.pop("features")
        results[kind, size] = result
        Console(stderr=True).print(f"{kind} {size} MiB: {results[kind, size]}")
    comparisons = [
        {
            "size_mb": size,
            "contender": kind,
            **compare(
                {"features": profiles[kind, size]}, {"features": profiles["reference", size]}
            ),
        }
        for size in args.size_mb
        for kind in ("streaming", "streaming-1")
        if (kind, size) in profiles and ("reference", size) in profiles
    ]

    table = Table(title="profiler: streaming vs reference vs pandas (one process each)")
    for column in (
        "contender",
        "file MiB",
        "rows",
        "seconds",
        "MB/s",
        "peak RSS MiB",
        "RSS after load MiB",
        "peak - load MiB",
    ):
        table.add_column(column, justify="right")
    for (kind, size), r in results.items():
        if "error" in r:
            table.add_row(kind, str(size), "-", "-", "-", "-", "-", r["error"][:60])
            continue
        table.add_row(
            kind,
            f"{r['mb']:.0f}",
            f"{r['n_examples']:,}",
            f"{r['seconds']:.1f}",
            f"{r['mb'] / r['seconds']:.1f}",
            f"{r['peak_rss_mb']:.0f}",
            f"{r['rss_ready_mb']:.0f}",
            f"{r['peak_rss_mb'] - r['rss_ready_mb']:.0f}",
        )
    out = Console(stderr=args.json)
    out.print(table)
    stream, naive = (
        results.get(("streaming", args.baseline_size_mb)),
        results.get(("pandas", args.baseline_size_mb)),
    )
    if args.json:
        print(
            json.dumps(
                {
                    "data": str(args.data),
                    "datasets": [f.name for f in files],
                    "skipped": skipped,
                    "runs": [
                        {
                            "contender": kind,
                            "size_mb": size,
                            **r,
                            **(
                                {
                                    "mb_per_s": r["mb"] / r["seconds"],
                                    "peak_minus_load_mb": _above_load(r),
                                }
                                if "error" not in r
                                else {}
                            ),
                        }
                        for (kind, size), r in results.items()
                    ],
                    "comparisons": comparisons,
                    "speedups": [
                        {
                            "size_mb": size,
                            "streaming_over_reference": results["reference", size]["seconds"]
                            / results["streaming", size]["seconds"],
                        }
                        for size in args.size_mb
                        if "error" not in results.get(("streaming", size), {"error": ""})
                        and "error" not in results.get(("reference", size), {"error": ""})
                    ],
                }
            )
        )
    for size in args.size_mb:
        fast, slow = results.get(("streaming", size)), results.get(("reference", size))
        if fast and slow and "error" not in fast and "error" not in slow:
            out.print(
                f"at {size} MiB: streaming / reference throughput = "
                f"{slow['seconds'] / fast['seconds']:.2f}x, peak RSS "
                f"{fast['peak_rss_mb']:.0f} vs {slow['peak_rss_mb']:.0f} MiB"
            )
    for comparison in comparisons:
        verdict = "identical" if comparison["identical_features"] else "DIFFERENT"
        out.print(
            f"at {comparison['size_mb']} MiB: {comparison['contender']} and reference profiles are "
            f"{verdict}"
            + ("" if comparison["identical_features"] else f": {comparison['differing']}")
        )
    if stream and naive and "error" not in stream and "error" not in naive:
        out.print(
            f"at {args.baseline_size_mb} MiB: peak RSS pandas / streaming = "
            f"{naive['peak_rss_mb'] / stream['peak_rss_mb']:.1f}x (above the import baseline: "
            f"{_above_load(naive) / max(1.0, _above_load(stream)):.1f}x); "
            f"throughput streaming / pandas = {naive['seconds'] / stream['seconds']:.2f}x"
        )


if __name__ == "__main__":
    main()
