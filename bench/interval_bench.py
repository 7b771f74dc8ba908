"""How honest and how sharp the recommender's 80 % intervals are, before a study has results.

On one or more knowledge-base files (``--kb``, repeatable), leave one dataset out at a time: its
measured configurations are predicted as a new dataset's would be
(``Recommender.held_out_predictions``: its descriptors and label probe, the other datasets' scales,
its own source weighted 0), and the interval factor is calibrated on the *other* datasets' held-out
predictions only (split-conformal, ``domain/intervals.py``), so no dataset's interval factor was
tuned on its own results (the fitted model's mean and kernel did see every dataset). Figures, pooled over datasets:

* ``interval_coverage`` / ``interval_median_width``: share of every measured run inside its 80 %
  interval, and the interval's median width (metric units);
* ``top3_interval_coverage`` / ``top3_interval_median_width`` / ``top3_mae``: the same on each
  dataset's three best runs (where a good recommendation lands), and their mean absolute error;
* the same figures for the baseline, in the same run: the same predictions without the label probe
  (the scales of the similar datasets, unmoved, as before the probe).

The knowledge-base files must carry the probe (``metatune kb probe FILE --data DATA`` fills it into a
file built before it). The interval's factor and the probe's design were chosen on the team's 21
datasets at the study default budget (seed v3); the GPU seed (another budget and device) was not
looked at before that choice.

    python bench/interval_bench.py --kb services/recommender/src/metatune_recommender/data/seed_kb_v3.jsonl [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchkit import finite, machine, print_json

from metatune.knowledge.files import read_kb_file
from metatune.knowledge.records import KbRun
from metatune_recommender.domain.intervals import HeldOut, conformal_factor, interval
from metatune_recommender.domain.metric_scale import metric_scale
from metatune_recommender.domain.recommender import Recommender

Held = Mapping[str, Sequence[HeldOut]]  # by task name
TOP = 3
Figures = dict[str, float | None]


def cross_conformal(held: Held, metric_name: str) -> Figures:
    """Each dataset's runs against intervals whose factor the other datasets calibrated."""
    scale = metric_scale(metric_name)
    inside: list[bool] = []
    widths: list[float] = []
    top_inside: list[bool] = []
    top_widths: list[float] = []
    top_errors: list[float] = []
    for name, rows in held.items():
        others = [row for other, r in held.items() if other != name for row in r]
        factor = conformal_factor([a - p for a, p, _ in others], [s for _, _, s in others])
        if factor is None:
            continue
        best = sorted(rows, key=lambda row: -row.achieved)[:TOP]
        for group, hits, spans in ((rows, inside, widths), (best, top_inside, top_widths)):
            for achieved, predicted, std in group:
                low, high = interval(predicted, std, factor, scale.low, scale.high)
                hits.append(low <= achieved <= high)
                spans.append(high - low)
        top_errors += [abs(achieved - predicted) for achieved, predicted, _ in best]

    def share(values: list[bool]) -> float | None:
        return sum(values) / len(values) if values else None

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    return {
        "interval_coverage": share(inside),
        "interval_median_width": median(widths),
        "top3_interval_coverage": share(top_inside),
        "top3_interval_median_width": median(top_widths),
        "top3_mae": statistics.fmean(top_errors) if top_errors else None,
    }


def measure(runs: Sequence[KbRun], base_model: str | None) -> tuple[Figures, Figures, int]:
    """The figures with the label probe and without it (the baseline), and the datasets left out."""
    recommender = Recommender(runs)
    bases = recommender.base_models()
    base = base_model or (bases[0] if bases else None)
    if base is None or base not in bases:
        sys.exit(f"interval_bench: no LoRA run of base model {base_model or 'any'} in --kb")
    history = recommender.history(base)
    if len(history) < 3:
        sys.exit(f"interval_bench: {len(history)} datasets of {base}: leaving one out needs 3")
    metric_name = history[0].metric_name
    return (
        cross_conformal(recommender.held_out_predictions(base), metric_name),
        cross_conformal(recommender.held_out_predictions(base, probes=False), metric_name),
        len(history),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kb", type=Path, action="append", required=True, help="KB file, repeatable"
    )
    parser.add_argument("--base-model", default=None, help="default: the files' first base model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    runs = [run for path in args.kb for run in read_kb_file(path).runs]
    probed = {
        r.dataset.name
        for r in runs
        if r.dataset.features
        and r.dataset.features.probe_accuracy is not None
        and (args.base_model is None or r.base_model == args.base_model)
    }
    if not probed:
        sys.exit(
            "interval_bench: no run in --kb carries a label probe: "
            "fill it with `metatune kb probe FILE --data DATA`"
        )
    start = time.process_time()
    probe, baseline, datasets = measure(runs, args.base_model)
    report = {
        "kb": [str(p) for p in args.kb],
        "datasets": datasets,
        "probed_datasets": len(probed),
        **{key: finite(value) for key, value in probe.items()},
        "baseline": {key: finite(value) for key, value in baseline.items()},
        "cpu_s": round(time.process_time() - start, 2),
        **machine(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print_json(report)
        return
    print(f"{datasets} datasets left out in turn ({len(probed)} with a probe); 80 % intervals")
    print("| figure | with the probe | without (baseline) |")
    print("|---|---|---|")
    for key in probe:
        a, b = probe[key], baseline[key]
        print(
            f"| {key} | {'-' if a is None else f'{a:.3f}'} | {'-' if b is None else f'{b:.3f}'} |"
        )
    print(f"{report['cpu_s']} CPU s; load average {report['load_avg']}")


if __name__ == "__main__":
    main()
