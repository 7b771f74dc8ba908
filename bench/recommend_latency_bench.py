"""How long a recommendation takes: ``metatune recommend`` cold and warm, and the service's call.

Each figure on one knowledge base (``--kb``, repeatable; default: every shipped seed) and one
profile (``--profile``, as ``metatune profile --json`` prints it), in a fresh data folder
(``METATUNE_DATA_DIR``, a temporary one):

* ``cold_s``: ``metatune recommend PROFILE --json`` with nothing cached: the prior is fitted, then
  kept with its NumPy scorer (``adapters/prior_cache.py``).
* ``baseline_s``: the same command with the fitted prior cached but its scorer removed before each
  run: the process imports torch and gpytorch, reads the prior, scores the candidates through
  gpytorch and makes the scorer again. What a warm ``metatune recommend`` did before the scorer
  (median of ``--runs``).
* ``warm_s``: the same command with both cached: the pre-result path reads the scorer and imports
  neither torch nor gpytorch (median of ``--runs``).
* ``service_warm_s``: in this process, after importing the service's modules (``app``), what the
  service's profile handler calls for a study's opening batch once the knowledge base is read: a
  new ``Recommender`` on the runs with the warm cache folder, then ``recommend`` (median of
  ``--runs``). The bus and the database read of the runs are not in it;
  ``service_next_profile_s`` is a second profile on that same recommender.

Every run's advice is compared with the cold run's: ``same_advice`` says whether the top-k
configurations, their predictions and costs are identical. Bytecode: a ``pip install`` compiles
every module once; a checkout run with ``PYTHONDONTWRITEBYTECODE=1`` compiles each import in each
process, seconds for torch. ``--pycache DIR`` runs the commands with bytecode kept in DIR
(``PYTHONPYCACHEPREFIX``), as an installed package has it; the report says which.

    python bench/recommend_latency_bench.py --profile PROFILE.json [--kb FILE ...] [--runs 3]
        [--base-model M] [--k 3] [--pycache DIR] [--json]

On a shared machine the load average says how much CPU the runs were given; it is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import benchkit
from benchkit import print_json
from rich.console import Console
from rich.table import Table

SCRIPT = Path(sys.executable).with_name("metatune")
LAUNCHER = [
    sys.executable,
    "-c",
    "from metatune_cli.cli.main import app; app(prog_name='metatune')",
]


def metatune(*args: str) -> list[str]:
    return [str(SCRIPT), *args] if SCRIPT.exists() else [*LAUNCHER, *args]


def cli_env(data_dir: Path, pycache: Path | None) -> dict[str, str]:
    """The commands' environment: the data folder, and bytecode kept in ``pycache`` if given."""
    env = dict(os.environ, METATUNE_DATA_DIR=str(data_dir))
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def recommend_argv(profile: Path, kb: Sequence[Path], base_model: str | None, k: int) -> list[str]:
    argv = ["recommend", str(profile), "--json", "--k", str(k)]
    for path in kb:
        argv += ["--kb", str(path)]
    if base_model:
        argv += ["--base-model", base_model]
    return metatune(*argv)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one process and the advice it printed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed, json.loads(proc.stdout)


def differences(reference: dict[str, Any], other: dict[str, Any]) -> float | None:
    """None when ``other`` recommends other configurations (or differs beyond the predictions);
    else the largest difference of a prediction or its ± from ``reference``'s."""
    ours, theirs = reference["recommendations"], other["recommendations"]
    if len(ours) != len(theirs):
        return None
    if {k: v for k, v in reference.items() if k != "recommendations"} != {
        k: v for k, v in other.items() if k != "recommendations"
    }:
        return None
    gap = 0.0
    for a, b in zip(ours, theirs, strict=True):
        rest = ("predicted", "std")
        if {k: v for k, v in a.items() if k not in rest} != {
            k: v for k, v in b.items() if k not in rest
        }:
            return None
        for key in rest:
            if (a[key] is None) != (b[key] is None):
                return None
            if a[key] is not None:
                gap = max(gap, abs(a[key] - b[key]))
    return gap


def in_process(
    kb: Sequence[Path], profile: dict[str, Any], base_model: str, k: int, cache: Path, runs: int
) -> tuple[float, float, dict[str, Any]]:
    """(first recommendation of a new recommender, a second profile on it, the first's advice),
    medians of ``runs``, in this process with the service's modules imported."""
    import metatune_recommender.app  # noqa: F401  # what the service process has imported
    from metatune.knowledge.files import read_kb_file
    from metatune_recommender.adapters.prior_cache import PriorCache
    from metatune_recommender.adapters.seeds import seed_paths
    from metatune_recommender.domain.recommender import Recommender, profile_descriptors

    kb_runs = [run for path in (kb or seed_paths()) for run in read_kb_file(path).runs]
    features = profile_descriptors(profile.get("features", profile))
    other = dict(features)
    for key in ("words_mean", "tokens_mean"):  # another dataset: longer texts
        if isinstance(other.get(key), (int, float)):
            other[key] = float(other[key]) * 1.5
    firsts, nexts = [], []
    advice: dict[str, Any] = {}
    for _ in range(runs):
        start = time.perf_counter()
        recommender = Recommender(kb_runs, store=PriorCache(cache))
        advice = recommender.recommend(base_model, features, k).as_dict()
        firsts.append(time.perf_counter() - start)
        start = time.perf_counter()
        recommender.recommend(base_model, other, k)
        nexts.append(time.perf_counter() - start)
    return statistics.median(firsts), statistics.median(nexts), json.loads(json.dumps(advice))


def machine() -> dict[str, Any]:
    return {
        **benchkit.machine(),
        "python": platform.python_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


# long: the bench's protocol in order: cold, warm, report
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", type=Path, required=True, help="PROFILE.json")
    parser.add_argument("--kb", type=Path, action="append", default=[], help="KB file, repeatable")
    parser.add_argument("--base-model", default=None, help="default: the CLI's")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3, help="measured runs per warm figure")
    parser.add_argument("--pycache", type=Path, default=None, help="keep bytecode in this folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    from metatune.models import EMBEDDED_MODEL

    base_model = args.base_model or EMBEDDED_MODEL
    profile = json.loads(args.profile.read_text(encoding="utf-8"))
    where = machine()
    data_dir = Path(tempfile.mkdtemp(prefix="recommend-latency-"))
    try:
        env = cli_env(data_dir, args.pycache)
        priors = data_dir / "recommender" / "priors"
        argv = recommend_argv(args.profile, args.kb, args.base_model, args.k)
        cold_s, reference = timed(argv, env)
        gaps: list[float | None] = []
        baselines, warms = [], []
        for _ in range(args.runs):
            for scorer in priors.glob("scorer-*.pickle"):
                scorer.unlink()
            seconds, advice = timed(argv, env)
            baselines.append(seconds)
            gaps.append(differences(reference, advice))
        for _ in range(args.runs):
            seconds, advice = timed(argv, env)
            warms.append(seconds)
            gaps.append(differences(reference, advice))
        service_s, next_s, advice = in_process(
            args.kb, profile, base_model, args.k, priors, args.runs
        )
        gaps.append(differences(reference, advice))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    same = all(gap is not None for gap in gaps)
    max_gap = max((gap for gap in gaps if gap is not None), default=0.0)
    baseline_s, warm_s = statistics.median(baselines), statistics.median(warms)
    report = {
        "cold_s": round(cold_s, 2),
        "warm_s": round(warm_s, 2),
        "service_warm_s": round(service_s, 3),
        "service_next_profile_s": round(next_s, 3),
        "baseline_s": round(baseline_s, 2),
        "warm_speedup": round(baseline_s / warm_s, 1),
        "same_advice": same,
        "max_prediction_difference": max_gap if same else None,
        "top": [r["config"] for r in reference["recommendations"]],
        "runs": args.runs,
        "kb": [str(p) for p in args.kb] or "shipped seeds",
        "profile": str(args.profile),
        "base_model": base_model,
        "bytecode": f"kept in {args.pycache}" if args.pycache else "as the environment has it",
        "python_dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        "machine": where,
        "date": where["at"],
        "load_avg": where["load_avg"],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print_json(report)
        return
    table = Table(title=f"metatune recommend latency (warm figures: median of {args.runs} runs)")
    for column in ("what", "seconds"):
        table.add_column(column, justify="left" if column == "what" else "right")
    table.add_row("CLI cold: prior fitted", f"{cold_s:.2f}")
    table.add_row("baseline: CLI, prior cached, no scorer (torch)", f"{baseline_s:.2f}")
    table.add_row("CLI warm: scorer cached (no torch)", f"{warm_s:.2f}")
    table.add_row("service call, new recommender, cache warm", f"{service_s:.3f}")
    table.add_row("service call, next profile", f"{next_s:.3f}")
    Console().print(table)
    print(
        f"same advice in every run: {same} (largest prediction difference {max_gap:.3g}); "
        f"bytecode {report['bytecode']}; {where['host_cpus']} CPUs, load average "
        f"{where['load_avg']} at the start, {report['load_avg_end']} at the end, {where['at']}"
    )


if __name__ == "__main__":
    main()
