#!/usr/bin/env python
"""Write the generated parts of the READMEs: the configuration table and the results tables.

    .venv/bin/python scripts/render_docs.py            # rewrite the generated blocks (and plots)
    .venv/bin/python scripts/render_docs.py --check    # exit 1 if a README differs from its sources

A generated block sits between ``<!-- BEGIN GENERATED: NAME -->`` and ``<!-- END GENERATED: NAME
-->`` in a README. ``settings`` is the configuration table, built from the pydantic-settings
classes (every field needs a description); ``results/...`` blocks are tables built from the
benchmark JSON committed under ``docs/results/`` (written by ``bench/<name>.py --json``). So a
figure in a README always comes from a committed file, and a setting cannot be added without
appearing in the table: ``tests/docs`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"

# Every pydantic-settings class of the platform, as "module:Class"; tests/docs checks that no
# BaseSettings subclass in shared/ or services/ is missing here.
SETTINGS_CLASSES = [  # the platform's, then each service's own (subclasses: their own fields only)
    "metatune.settings:Settings",
    "metatune_profiler.settings:ProfilerSettings",
    "metatune_forecaster.settings:ForecasterSettings",
    "metatune_scheduler.settings:SchedulerSettings",
    "metatune_telemetry.settings:TelemetrySettings",
    "metatune_trainer_agent.settings:AgentSettings",
    "metatune_cli.settings:CliSettings",
]

BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[\w/.-]+) -->\n)(?P<body>.*?)(<!-- END GENERATED: (?P=name) -->)",
    re.DOTALL,
)
SECRET_NAME = re.compile(r"(secret|password|token|api_key)")


class DocsError(Exception):
    """A generated block cannot be rendered (undocumented setting, missing JSON, unknown block)."""


# ---------------------------------------------------------------- configuration table


def settings_classes() -> list[type[BaseSettings]]:
    out = []
    for spec in SETTINGS_CLASSES:
        module, name = spec.split(":")
        out.append(getattr(importlib.import_module(module), name))
    return out


def env_name(cls: type[BaseSettings], name: str, field: FieldInfo) -> str:
    if isinstance(field.validation_alias, str):
        return field.validation_alias.upper()
    return f"{cls.model_config.get('env_prefix', '')}{name}".upper()


def type_text(annotation: Any) -> str:
    """A reader's name for a field type: ``path``, ``list of path (JSON)``, ```a` or `b```."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        inner = [type_text(a) for a in args if a is not type(None)]
        optional = type(None) in args
        return " or ".join(inner) + (", optional" if optional else "")
    if origin is list:
        return f"list of {type_text(args[0])} (JSON)"
    names = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        Path: "path",
    }
    if annotation in names:
        return names[annotation]
    return getattr(annotation, "__name__", str(annotation)).replace("AwareDatetime", "datetime")


def is_secret(name: str, field: FieldInfo) -> bool:
    """A setting holding a secret itself (not a path to one): its default is never shown."""
    if name.endswith(("_file", "_dir", "_path")):
        return False
    return bool(SECRET_NAME.search(name)) or "Secret" in str(field.annotation)


def default_text(name: str, field: FieldInfo) -> str:
    if is_secret(name, field):
        return "(secret, not shown)"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "(required)"
    else:
        value = field.default
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and name.endswith("_bytes") and value >= 1024**2:
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2)):
            if value % size == 0:
                return f"`{value}` ({value // size} {unit})"
    if isinstance(value, float) and value.is_integer():
        return f"`{value:g}`"
    if isinstance(value, list):
        return f"`{json.dumps([str(v) for v in value])}`"
    return f"`{value}`"


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def own_fields(cls: type[BaseSettings], platform: type[BaseSettings]) -> dict[str, FieldInfo]:
    """The fields ``cls`` declares itself: a service's settings class without the platform's."""
    inherited = (
        set(platform.model_fields) if cls is not platform and issubclass(cls, platform) else set()
    )
    return {name: field for name, field in cls.model_fields.items() if name not in inherited}


def settings_rows(
    cls: type[BaseSettings], platform: type[BaseSettings]
) -> Iterator[tuple[str, str, str, str]]:
    """(variable, type, default, description) of each of ``cls``'s own settings."""
    for name, field in own_fields(cls, platform).items():
        yield (
            f"`{env_name(cls, name, field)}`",
            type_text(field.annotation),
            default_text(name, field),
            field.description or "",
        )


def render_settings() -> str:
    """A table per settings class, captioned by its docstring's first line; an undocumented
    setting raises."""
    classes = settings_classes()
    platform = classes[0]  # the others subclass it
    missing = [
        f"{cls.__module__}.{cls.__name__}.{name}"
        for cls in classes
        for name, field in own_fields(cls, platform).items()
        if not (field.description or "").strip()
    ]
    if missing:
        raise DocsError(f"settings without a description (Field(description=...)): {missing}")
    blocks = []
    for cls in classes:
        caption = (cls.__doc__ or cls.__name__).strip().splitlines()[0]
        lines = [f"**{caption}**", f"(`{cls.__module__}.{cls.__name__}`)", ""]
        lines += ["| variable | type | default | description |", "|---|---|---|---|"]
        rows = settings_rows(cls, platform)
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


# ---------------------------------------------------------------- results tables


def load_result(name: str) -> dict[str, Any]:
    """``docs/results/<name>.json``: a benchmark's ``--json`` object plus its ``command``."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise DocsError(f"{path.relative_to(ROOT)} is missing")
    data: dict[str, Any] = json.loads(path.read_text())
    for key in ("command", "measured_on", "provenance"):
        if key not in data:
            raise DocsError(f"{path.relative_to(ROOT)} has no {key!r}")
    return data


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(str(c)) for c in row) + " |" for row in rows]


def source_note(*names: str) -> list[str]:
    """Where each JSON behind a table came from: its command and machine (one bullet per file)."""
    out = [""]
    for name in names:
        data = load_result(name)
        kind = (
            ""
            if data["provenance"] == "measured"
            else ", reconstructed from earlier README figures"
        )
        text = (
            f"[`{name}.json`](docs/results/{name}.json){kind}: `{data['command']}` "
            f"({data['measured_on']})."
        )
        out.append(f"* {text}" if len(names) > 1 else f"From {text}")
    return out


RENDERERS: dict[str, Callable[[], list[str]]] = {}


def renders(name: str) -> Callable[[Callable[[], list[str]]], Callable[[], list[str]]]:
    def register(fn: Callable[[], list[str]]) -> Callable[[], list[str]]:
        RENDERERS[name] = fn
        return fn

    return register


def pct(share: float | None, digits: int = 0) -> str:
    return "-" if share is None else f"{100 * share:.{digits}f} %"


def num(value: float | None, fmt: str = ",.0f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{fmt}}{unit}"


def bold(text: str) -> str:
    return f"**{text}**"


def verdict(what: str, met: bool) -> str:
    """Whether a stated floor is met, read from the figures (never written by hand)."""
    return f"{what}: {'**met**' if met else '**not met** on this run'}."


def rate(value: float | None) -> str:
    """A throughput, or '-' where the run did not record it."""
    return "-" if value is None else f"{value:,.0f}"


# profiler ---------------------------------------------------------------------------


PROFILER_CONTENDERS = {
    "streaming": "streaming `profile_file` (column batches)",
    "streaming-1": "streaming `profile_file` in one process (the previous pass)",
    "reference": "row by row (`profile_file_by_rows`, the previous path)",
    "pandas": "pandas baseline",
}


def profiler_rows(name: str) -> list[list[str]]:
    rows = []
    for run in load_result(name)["runs"]:
        label = PROFILER_CONTENDERS.get(run["contender"], run["contender"])
        if run["contender"] == "streaming" and run.get("workers", 1) > 1:
            label = f"streaming `profile_file` ({run['workers']} worker processes)"
        rows.append(
            [
                label,
                f"{run['size_mb']} MiB",
                num(run["n_examples"]),
                num(run["seconds"], ".1f"),
                num(run["mb_per_s"], ".1f"),
                bold(num(run["peak_rss_mb"], ",.0f", " MiB")),
                num(run["rss_ready_mb"], ",.0f", " MiB"),
                num(run["peak_minus_load_mb"], ",.0f", " MiB"),
            ]
        )
    return rows


def peak_ratio(name: str) -> str:
    runs = load_result(name)["runs"]
    pandas = next(r for r in runs if r["contender"] == "pandas")
    same = next(
        r for r in runs if r["contender"] == "streaming" and r["size_mb"] == pandas["size_mb"]
    )
    return (
        f"at {pandas['size_mb']} MiB the pandas baseline peaks "
        f"{pandas['peak_rss_mb'] / same['peak_rss_mb']:.1f}x higher and takes "
        f"{pandas['seconds'] / same['seconds']:.1f}x as long"
    )


@renders("results/profiler")
def _profiler() -> list[str]:
    header = ["contender", "file", "rows", "seconds", "MB/s", "peak RSS", "RSS after tokenizer"]
    header.append("peak − load")
    out = table(header, profiler_rows("profiler_bench"))
    result = load_result("profiler_bench")
    streaming = [r for r in result["runs"] if r["contender"] == "streaming"]
    big = max(streaming, key=lambda r: r["size_mb"])
    out += [
        "",
        f"At {big['size_mb']:,} MiB the streaming profiler peaks at {big['peak_rss_mb']:,.0f} MiB; "
        f"{peak_ratio('profiler_bench')}.",
    ]
    for speedup, same in zip(
        result.get("speedups", []), result.get("comparisons", []), strict=False
    ):
        out[-1] += (
            f" At {speedup['size_mb']:,} MiB the column batches take "
            f"{1 / speedup['streaming_over_reference']:.0%} of the row-by-row path's time"
            + (", with identical features." if same.get("identical_features") else ".")
        )
    out += source_note("profiler_bench")
    if (RESULTS / "profiler_bench.small.json").is_file():
        out += ["", *table(header, profiler_rows("profiler_bench.small"))]
        out += ["", f"A smaller file: {peak_ratio('profiler_bench.small')}."]
        out += source_note("profiler_bench.small")
    return out


# recommender ------------------------------------------------------------------------


@renders("results/recommender")
def _recommender() -> list[str]:
    data = load_result("recommender_bench")
    header = ["method", "savings to top-1 % (geo mean)", "top-5 %", "nr@1", "nr@3", "nr@10"]
    header += ["nr@50", "top-3 within 2 %"]
    rows = []
    for method, m in data["methods"].items():
        cells = [
            method,
            f"{m['speedup_top1_vs_random']:.1f}x",
            f"{m['speedup_top5_vs_random']:.1f}x",
            *(f"{m['regret'][k]:.3f}" for k in ("1", "3", "10", "50")),
            pct(m["top3_within_2pct_share"]),
        ]
        rows.append([bold(c) for c in cells] if method == "metatune" else cells)
    ours = data["methods"]["metatune"]
    per_task = ", ".join(
        f"{t['task']} {t['methods']['metatune']['evals_top1']:.1f} "
        f"({t['methods']['random']['evals_top1']:.1f})"
        for t in data["tasks"]
    )
    return [
        *table(header, rows),
        "",
        f"Evaluations to a top-1 % row, mean over {data['protocol']['seeds']} seeds "
        f"(random's exact expectation in brackets): {per_task}.",
        "",
        verdict(
            "The targets: at least 10x fewer evaluations than random search",
            ours["speedup_top1_vs_random"] >= 10,
        ),
        verdict(
            "A top-3 within 2 % on at least 80 % of tasks", ours["top3_within_2pct_share"] >= 0.8
        ),
        *source_note("recommender_bench"),
    ]


# forecaster -------------------------------------------------------------------------

NAIVE = ("naive-24h", "naive-168h", "mean-7d")


def coverage_by_lead_rows(data: dict[str, Any]) -> list[list[str]]:
    """The summary rows of the interval's coverage by lead bucket, all regions' hours pooled
    (results without it, older runs, give none)."""
    by_lead = data.get("coverage_by_lead")
    if not by_lead:
        return []
    leads = " / ".join(by_lead)
    return [
        [f"10-90 % coverage by lead, all regions' hours pooled, {leads} h"]
        + [
            " / ".join(f"{e[k]:.1f}" for e in by_lead.values()) + " %"
            for k in ("coverage", "static_coverage")
        ],
        [f"regions within 80 ± 5 points, {leads} h"]
        + [
            " / ".join(str(e[f"{k}_regions_within"]) for e in by_lead.values())
            for k in ("coverage", "static_coverage")
        ],
    ]


@renders("results/forecaster")
def _forecaster() -> list[str]:
    data = load_result("forecaster_bench")
    rows, buckets = data["rows"], list(data["median_gain_vs_seasonal"]["model"])
    n = data["region_buckets"]
    within = {
        key: sum(abs(r[key] - 80) <= 5 for r in rows) for key in ("coverage", "static_coverage")
    }
    gains = {
        key: " / ".join(f"{v:+.1f}" for v in data["median_gain_vs_seasonal"][key].values()) + " %"
        for key in ("model", "static")
    }
    summary = table(
        ["measure", "model (recalibrated)", "trees alone"],
        [
            [
                f"median gain over the better seasonal naive, {' / '.join(buckets)} h",
                gains["model"],
                gains["static"],
            ],
            ["not worse than the best naive baseline (MAPE)"]
            + [f"{data['not_worse_than_best_naive'][k]} / {n}" for k in ("model", "static")],
            ["... of those, with a worse wMAPE than that baseline"]
            + [str(data["mape_bought_with_worse_wmape"][k]) for k in ("model", "static")],
            ["10-90 % coverage within 80 ± 5 points"]
            + [f"{within[k]} / {n}" for k in ("coverage", "static_coverage")],
            ["median 10-90 % coverage"]
            + [f"{data['coverage_median'][k]:.1f} %" for k in ("coverage", "static_coverage")],
            *coverage_by_lead_rows(data),
        ],
    )
    by_region: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_region.setdefault(row["region"], []).append(row)
    detail = []
    for region, parts in by_region.items():
        best = [min(p[b]["mape"] for b in NAIVE) for p in parts]
        detail.append(
            [
                region,
                " / ".join(f"{p['model']['mape']:.1f}" for p in parts),
                " / ".join(f"{b:.1f}" for b in best),
                " / ".join(f"{p['coverage']:.0f}" for p in parts),
            ]
        )
    head = ["region", "model MAPE %", "best naive MAPE %", "coverage 10-90 %"]
    return [
        f"Trained before {str(data['trained_until'])[:10]}, tested from {data['test_from'][:10]}, "
        f"{len(by_region)} zones, issues every {data['stride_h']} h, lead buckets {', '.join(buckets)} h:",
        "",
        *summary,
        "",
        "![MAPE per region](docs/results/forecaster_mape.png)",
        "",
        *table(head, detail),
        *source_note("forecaster_bench"),
    ]


# scheduler --------------------------------------------------------------------------

CARBON = ("ample", "residency", "tight")


def carbon_settings() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for setting in CARBON:
        out |= load_result(f"scheduler_carbon_bench.{setting}")["settings"]
    return out


@renders("results/scheduler")
def _scheduler() -> list[str]:
    header = ["setting", "jobs", "P1 t", "P2 t", "S t", "S* t", "O t (gap)"]
    header += [
        "S capture (vs O's bound)",
        "S* capture (vs O's bound)",
        "missed",
        "re-plans, mean s",
    ]
    rows = []
    for setting, f in carbon_settings().items():
        limit = ", time limit" if f["o_hit_time_limit"] else ""
        rows.append(
            [
                f"{setting} ({f['capacity_gpus']} GPUs per datacenter)",
                str(f["jobs"]),
                *(f"{f[k]:.4f}" for k in ("p1_t", "p2_t", "s_t", "s_star_t")),
                f"{f['o_t']:.4f} ({pct(f['o_gap'], 2)}{limit})",
                f"{pct(f['s_capture'])} ({pct(f['s_capture_vs_bound'])})",
                f"{pct(f['s_star_capture'])} ({pct(f['s_star_capture_vs_bound'])})",
                "/".join(str(v) for v in f["missed"].values()),
                f"{f['solves']}, {f['mean_solve_s']:.2f}",
            ]
        )
    tight = carbon_settings()["tight"].get("free_migration")
    out = table(header, rows)
    if tight:
        out += [
            "",
            f"Tight, against the offline optimum with free hourly migration ({tight['objective_t']:.4f} t,"
            f" bound {tight['bound_t']:.4f} t): S {pct(tight['s_capture'])}"
            f" ({pct(tight['s_capture_vs_bound'])}), S* {pct(tight['s_star_capture'])}"
            f" ({pct(tight['s_star_capture_vs_bound'])}).",
        ]
    out += ["", "![emissions per planner](docs/results/scheduler_emissions.png)"]
    out += source_note(*(f"scheduler_carbon_bench.{s}" for s in CARBON))
    scales = ("scheduler_scale_bench", "scheduler_scale_bench.10k")
    sizes = [(size, f) for name in scales for size, f in load_result(name)["sizes"].items()]
    header = ["size (jobs x datacenters)", "binaries (hourly)", "greedy kg", "LP bound kg"]
    header += ["CG bound kg", "re-plan s (CPU s)", "re-plan kg", "vs best known", "vs best bound"]
    rows = [
        [
            size.replace("x", " x ") + (" (hours unplaced)" if f["replan_hours_unplaced"] else ""),
            num(f["binaries_hourly"]),
            num(f["greedy_kg"], ",.1f"),
            num(f["lp_bound_kg"], ",.1f"),
            num(f.get("cg_bound_kg"), ",.1f"),
            bold(f"{f['shipped_replan_s']:.2f}")
            + (f" ({f['shipped_replan_cpu_s']:.2f})" if "shipped_replan_cpu_s" in f else ""),
            num(f["replan_realised_hourly_kg"], ",.1f"),
            f"{100 * f['gap_vs_best_known']:+.2f} %",
            f"{100 * f['gap_vs_best_bound']:+.2f} %",
        ]
        for size, f in sizes
        if "skipped" not in f
    ]
    return [*out, "", *table(header, rows), *source_note(*scales)]


PREFERENCES = ("greenest", "balanced", "fastest")


@renders("results/scheduler-preferences")
def _scheduler_preferences() -> list[str]:
    """The carbon bench once per carbon preference (every job with it), and greenest without
    hysteresis: emissions, delay and re-plan moves per job beside the capture figures."""
    header = ["preference (hysteresis)", "setting", "jobs", "P2 t", "S t", "O t"]
    header += ["S capture beyond greedy", "S* capture", "missed P2/S", "mean delay S (P2), h"]
    header += ["re-plan moves per job (near)"]
    names = [f"scheduler_carbon_bench.{p}" for p in PREFERENCES]
    for extra in (
        "greenest-no-hysteresis",
        "greenest-forecaster",
        "greenest-forecaster-no-hysteresis",
    ):
        if (RESULTS / f"scheduler_carbon_bench.{extra}.json").is_file():
            names.append(f"scheduler_carbon_bench.{extra}")
    rows = []
    for name in names:
        data = load_result(name)
        label = f"{data['preference']} ({pct(data['hysteresis_share'])})"
        if data["forecast"] == "model":  # the others plan on seasonal-naive forecasts
            label += ", the forecaster's forecasts"
        for setting, f in data["settings"].items():
            rows.append(
                [
                    label,
                    f"{setting} ({f['capacity_gpus']} GPUs per datacenter)",
                    str(f["jobs"]),
                    *(f"{f[k]:.4f}" for k in ("p2_t", "s_t", "o_t")),
                    f"{pct(f['s_capture'])} ({pct(f['s_capture_vs_bound'])})",
                    pct(f["s_star_capture"]),
                    f"{f['missed']['P2']}/{f['missed']['S']}",
                    f"{f['s_mean_delay_h']:.2f} ({f['p2_mean_delay_h']:.2f})",
                    f"{f['s_moves_per_job']:.2f} ({f['s_near_moves_per_job']:.2f})",
                ]
            )
    return [*table(header, rows), *source_note(*names)]


@renders("results/load")
def _load() -> list[str]:
    data = load_result("load_bench")
    header = ["run", "submitted", "planned", "throughput /s", "p50 ms", "p99 ms", "max ms"]
    header += ["full solves (superseded)", "fast-path decisions", "wall s (CPU s)"]

    def cells(label: str, r: dict[str, Any]) -> list[str]:
        return [
            label,
            num(r["submitted"]),
            num(r["planned"]),
            num(r["throughput_per_s"], ".1f"),
            num(r["p50_ms"]),
            bold(num(r["p99_ms"])),
            num(r["max_ms"]),
            f"{num(r['solves'])} ({num(r.get('superseded_solves'))})",
            num(r["fast_path_decisions"]),
            f"{num(r.get('wall_s'), '.1f')} ({num(r.get('cpu_s'), '.1f')})",
        ]

    rows = [cells("coalescing + fast path", data)]
    if data.get("baseline"):
        rows.append(cells("baseline: re-plan per event, no fast path", data["baseline"]))
    load = data.get("load_avg_1m")
    note = f" Load average (1 min) before and after: {load[0]} -> {load[1]}." if load else ""
    if data.get("stress_processes"):
        note += f" {data['stress_processes']} busy processes beside the platform (`--stress`)."
    return [
        *table(header, rows),
        "",
        f"{data['rate_per_s']:g} submissions per second.{note}",
        *source_note("load_bench"),
    ]


# trainer-agent ----------------------------------------------------------------------


# long: one README block, rendered top to bottom
@renders("results/trainer-agent")
def _trainer() -> list[str]:
    data = load_result("trainer_bench")
    header = ["dataset", "loop", "precision", "padding per useful token", "step time s"]
    header += ["useful tokens/s", "speed-up"]
    rows = [
        [
            r["dataset"],
            r["variant"],
            r["precision"],
            f"{r['padding_per_useful_token']:.2f}",
            f"{r['step_s']:.2f}",
            num(r["useful_tokens_per_s"]),
            bold(f"{r['speedup']:.2f}x") if r["variant"] == "agent" else f"{r['speedup']:.2f}x",
        ]
        for r in data["rows"]
    ]
    out = [
        f"{data['device'].upper()}, {data['steps']} optimizer steps, batch {data['batch_size']}, "
        f"max_seq_length {data['max_seq_length']}:",
        "",
        *table(header, rows),
        *source_note("trainer_bench"),
    ]
    prec = load_result("trainer_bench.precision")
    rows = [
        [
            d["dataset"],
            " / ".join(f"{v:.4f}" for v in d["fp32_val_loss"]),
            " / ".join(f"{v:.4f}" for v in d["bf16_val_loss"]),
            f"{d['loss_diff']:+.5f}",
            f"{d['seed_noise']:.4f}",
            "yes" if d["within_noise"] else "no",
            rate(d.get("fp32_tokens_per_s")),
            rate(d.get("bf16_tokens_per_s")),
            "-" if d.get("speedup") is None else f"**{d['speedup']:.2f}x**",
        ]
        for d in prec["datasets"]
    ]
    head = ["dataset", "fp32 val loss (seeds)", "bf16 val loss (seeds)", "bf16 − fp32"]
    head += ["seed spread", "within noise", "fp32 tokens/s", "bf16 tokens/s", "bf16 speed-up"]
    out += ["", f"bf16 autocast against fp32 on a CPU with native bf16 ({prec['cpu']}):", ""]
    out += [*table(head, rows)]
    if prec.get("speedup_mean") is not None:
        out += [
            "",
            f"Mean speed-up of bf16 over fp32: {prec['speedup_mean']:.2f}x, final loss within "
            f"the seeds' spread on {'every' if prec['all_within_noise'] else 'not every'} dataset.",
        ]
    out += [*source_note("trainer_bench.precision")]
    stop = load_result("early_stop_bench")
    names = {
        "none": "none",
        "plateau": "plateau rule",
        "median": "median stopping rule",
    }
    policies = {**stop["baselines"], f"curve@{stop['confidence']:g}": stop}
    prefixes = {
        "curve@": "curve stopper, confidence ",
        "curve-unguarded@": "curve stopper without the pace guard, confidence ",
        "curve-plain@": "curve stopper with one band width, confidence ",
    }
    rows = []
    for name, r in policies.items():
        label = names.get(name, name)
        for prefix, words in prefixes.items():
            if name.startswith(prefix):
                label = words + name.removeprefix(prefix)
        if r is stop:
            label += " (the agent's default)"
        rows.append(
            [
                label,
                pct(r["compute_saved_share"], 1),
                pct(r["best_run_stopped_share"], 1),
                pct(r.get("best_lost_beyond_tolerance_share"), 1),
                f"{r['mean_regret']:.3f}",
            ]
        )
    head = ["policy", "compute saved", "best run stopped (share of studies)"]
    head += [f"best lost beyond {stop.get('tolerance', 0.01):g}", "mean regret (accuracy)"]
    out += [
        "",
        f"Early stopping, leave one dataset out: {stop['datasets']} datasets, {stop['runs']} runs, "
        f"{stop['studies']} studies:",
        "",
        *table(head, rows),
        "",
        verdict(
            "The floors (at least 30 % of the compute saved, the best run stopped in at most "
            "5 % of studies)",
            stop["compute_saved_share"] >= 0.30 and stop["best_run_stopped_share"] <= 0.05,
        ),
        *source_note("early_stop_bench"),
    ]
    return out


# telemetry --------------------------------------------------------------------------


@renders("results/telemetry")
def _telemetry() -> list[str]:
    data = load_result("telemetry_bench")
    runs = [data, *([data["one_point_per_event"]] if "one_point_per_event" in data else [])]
    header = [
        "path",
        "steps an event",
        "messages",
        "rows stored = unique steps",
        "rows/s",
        "events/s",
    ]
    rows = []
    notes = []
    for run in runs:
        steps = run.get("points_per_event", 1)
        rows += [
            [
                f"COPY, batches of {run['batch']}",
                str(steps),
                num(run["messages"]),
                f"{run['stored']:,} = {run['unique']:,}",
                bold(num(run["copy_rows_per_s"])) if run is data else num(run["copy_rows_per_s"]),
                num(run.get("events_per_s", run["copy_rows_per_s"])),
            ],
            [
                "row-by-row INSERT",
                str(steps),
                num(run["insert_messages"]),
                f"{run['insert_stored']:,} = {run['insert_unique']:,}",
                num(run["insert_rows_per_s"]),
                "",
            ],
        ]
        per_100k = 100_000 / run["unique"]
        server = None if run["server_cpu_s"] is None else run["server_cpu_s"] * per_100k
        load = run["load_avg_1m"]
        notes.append(
            f"{steps} step(s) an event: COPY {run['speedup']:.1f}x faster; its CPU per 100k rows: "
            f"client {run['client_cpu_s'] * per_100k:.2f} s + server {num(server, '.2f')} s; load "
            f"average (1 min) {load[0]} -> {load[1]}."
        )
    return [
        *table(header, rows),
        "",
        " ".join(notes),
        "",
        verdict("The target of 50,000 metric rows/s", data["copy_rows_per_s"] >= 50_000),
        *source_note("telemetry_bench"),
    ]


def render_block(name: str, readme: Path) -> str:
    if name == "settings":
        return render_settings()
    if name not in RENDERERS:
        raise DocsError(f"{readme.relative_to(ROOT)}: unknown generated block {name!r}")
    lines = []
    for line in RENDERERS[name]():
        line = line.replace("../shared/data/", "$DATA/")  # the data folder, named once in README
        if line.startswith(("|", "![")) or len(line) <= 100:
            lines.append(line)
        else:
            indent = "  " if line.startswith("* ") else ""
            lines += textwrap.wrap(
                line, 100, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
            )
    text = "\n".join(lines) + "\n"
    # links in the notes are written from the repository root; make them relative to the README
    depth = len(readme.relative_to(ROOT).parts) - 1
    if depth:
        text = text.replace("](docs/", "](" + "../" * depth + "docs/")
    return text


# top README ------------------------------------------------------------------------


@renders("results/demo")
def _demo() -> list[str]:
    """The closing table of ``metatune demo --json`` and its summary line, cell for cell what the
    demo prints (the same functions render both)."""
    from metatune_cli.demo.view import closing_summary, closing_table

    data = load_result("demo")
    summary = closing_summary(data)
    if data.get("scripts_demo_s"):
        summary = summary.removesuffix(".") + (
            f", {data['scripts_demo_s']:.0f} s for `./scripts/demo` in a fresh clone, set-up included."
        )
    columns, rows = closing_table(data)
    return [*table(columns, rows), "", summary, *source_note("demo")]


def link(name: str) -> str:
    return f"[{name}.json](docs/results/{name}.json)"


# long: one README block, rendered top to bottom
@renders("results/summary")
def _summary() -> list[str]:
    rows = []
    prof = {(r["contender"], r["size_mb"]): r for r in load_result("profiler_bench")["runs"]}
    big = max(prof.values(), key=lambda r: r["size_mb"])
    rows.append(
        [
            "[profiler](services/profiler/README.md)",
            f"{big['size_mb'] / 1024:g} GiB of JSON lines profiled in {big['peak_rss_mb']:,.0f} MiB peak "
            f"RSS at {big['mb_per_s']:.1f} MB/s; {peak_ratio('profiler_bench')}",
            link("profiler_bench"),
        ]
    )
    rec = load_result("recommender_bench")["methods"]
    ours = rec["metatune"]
    brain = load_result("brain_bench")
    worth_nine = sum(k >= 9 for k in brain["top3_vs_random_k"]["per_dataset"].values())
    others = ", ".join(
        f"{m} {r['speedup_top1_vs_random']:.1f}x"
        for m, r in rec.items()
        if m not in ("metatune", "random")
    )
    rows.append(
        [
            "[recommender](services/recommender/README.md)",
            f"{ours['speedup_top1_vs_random']:.1f}x fewer evaluations than random search to a top-1 % "
            f"configuration ({others}); top-3 within 2 % of the best on "
            f"{pct(ours['top3_within_2pct_share'])} of tasks; trained end to end on "
            f"{len(brain['datasets'])} unseen datasets, the top-3 is worth the best of "
            f"{brain['top3_vs_random_k']['median']:.0f} random configurations (median), at least "
            f"9 on {worth_nine} of them",
            f"{link('recommender_bench')}, {link('brain_bench')}",
        ]
    )
    fc = load_result("forecaster_bench")
    gains = " / ".join(f"{v:+.1f}" for v in fc["median_gain_vs_seasonal"]["model"].values())
    rows.append(
        [
            "[forecaster](services/forecaster/README.md)",
            f"median MAPE gain over the better seasonal-naive forecast {gains} % at "
            f"{' / '.join(fc['median_gain_vs_seasonal']['model'])} h; not worse than the best naive "
            f"baseline in {fc['not_worse_than_best_naive']['model']} of {fc['region_buckets']} "
            "region-buckets"
            + (
                "; the 10-90 % interval covers "
                + " / ".join(f"{e['coverage']:.1f}" for e in fc["coverage_by_lead"].values())
                + f" % at {' / '.join(fc['coverage_by_lead'])} h"
                if fc.get("coverage_by_lead")
                else ""
            ),
            link("forecaster_bench"),
        ]
    )
    carbon = carbon_settings()
    captures = ", ".join(
        f"{s} {pct(f['s_capture_vs_bound'])} / {pct(f['s_star_capture_vs_bound'])}"
        for s, f in carbon.items()
    )
    scale = {
        size: f
        for name in ("scheduler_scale_bench", "scheduler_scale_bench.10k")
        for size, f in load_result(name)["sizes"].items()
    }
    size, largest = max(scale.items(), key=lambda kv: kv[1].get("jobs", 0))
    rows.append(
        [
            "[scheduler](services/scheduler/README.md)",
            f"a month of {carbon['ample']['jobs']} jobs on real grids: share of the greedy-to-optimal "
            f"gap closed by S (forecasts) / S* (exact intensities), against the offline bound: "
            f"{captures}; re-plan of {size.replace('x', ' jobs x ')} datacenters in "
            f"{largest['shipped_replan_s']:.2f} s, {100 * largest['gap_vs_best_known']:.2f} % above "
            "the best plan known",
            ", ".join(link(f"scheduler_carbon_bench.{s}") for s in CARBON)
            + ", "
            + link("scheduler_scale_bench")
            + ", "
            + link("scheduler_scale_bench.10k"),
        ]
    )
    load = load_result("load_bench")
    rows.append(
        [
            "scheduler under [load](#load)",
            f"{load['submitted']:,} submissions at {load['rate_per_s']:g}/s, {load['planned']:,} planned, "
            f"first decision p99 {load['p99_ms']:.0f} ms",
            link("load_bench"),
        ]
    )
    trainer = {(r["dataset"], r["variant"]): r for r in load_result("trainer_bench")["rows"]}
    speed = ", ".join(f"{d} {r['speedup']:.2f}x" for (d, v), r in trainer.items() if v == "agent")
    stop = load_result("early_stop_bench")
    rows.append(
        [
            "[trainer-agent](services/trainer-agent/README.md)",
            f"useful tokens/s against a naive loop (CPU): {speed}; the learning-curve stopper saves "
            f"{pct(stop['compute_saved_share'])} of the compute and stops the best run in "
            f"{pct(stop['best_run_stopped_share'])} of studies",
            link("trainer_bench") + ", " + link("early_stop_bench"),
        ]
    )
    tel = load_result("telemetry_bench")
    rows.append(
        [
            "[telemetry](services/telemetry/README.md)",
            f"{tel['copy_rows_per_s']:,.0f} metric rows/s by COPY against {tel['insert_rows_per_s']:,.0f} "
            f"row by row, {tel['stored']:,} stored of {tel['unique']:,} unique steps "
            f"({tel.get('points_per_event', 1)} an event, 10 % redelivered)",
            link("telemetry_bench"),
        ]
    )
    return [
        line
        for service, figure, source in rows
        for line in textwrap.wrap(
            f"* {service}: {figure} (from {source})",
            width=100,
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    ]


# ---------------------------------------------------------------- plots


def plot_forecaster(out: Path) -> None:
    import matplotlib.pyplot as plt

    data = load_result("forecaster_bench")
    regions = sorted({r["region"] for r in data["rows"]})
    buckets = list(data["median_gain_vs_seasonal"]["model"])
    fig, axes = plt.subplots(1, len(buckets), figsize=(12, 4.5), sharey=True)
    for ax, bucket in zip(axes, buckets, strict=True):
        rows = {r["region"]: r for r in data["rows"] if r["bucket"] == bucket}
        y = range(len(regions))
        model = [rows[r]["model"]["mape"] for r in regions]
        naive = [min(rows[r][b]["mape"] for b in NAIVE) for r in regions]
        ax.barh([i + 0.2 for i in y], naive, height=0.4, label="best naive baseline", color="#bbb")
        ax.barh([i - 0.2 for i in y], model, height=0.4, label="forecaster", color="#2a7")
        ax.set_title(f"lead {bucket} h")
        ax.set_xlabel("MAPE %")
        ax.set_yticks(list(y), [r.split(":")[1] for r in regions])
    axes[0].legend(loc="lower right")
    fig.suptitle(
        f"Carbon-intensity forecast error by grid, test period from {data['test_from'][:10]}"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=90, metadata={"Software": None})
    plt.close(fig)


def plot_scheduler(out: Path) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    settings = carbon_settings()
    planners = [("P1 run now at home", "p1_t"), ("P2 greedy", "p2_t"), ("S (forecasts)", "s_t")]
    planners += [("S* (exact intensities)", "s_star_t"), ("O offline", "o_t")]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.16
    for k, (label, key) in enumerate(planners):
        xs = [i + (k - 2) * width for i in range(len(settings))]
        ax.bar(xs, [f[key] for f in settings.values()], width=width, label=label)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(len(settings)), list(settings))
    ax.set_ylabel("t CO2eq (log scale)")
    ax.set_title("A month of jobs on 11 grids: emissions by planner")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90, metadata={"Software": None})
    plt.close(fig)


PLOTS: dict[str, Callable[[Path], None]] = {
    "forecaster_mape.png": plot_forecaster,
    "scheduler_emissions.png": plot_scheduler,
}


def write_plots() -> None:
    import matplotlib

    matplotlib.use("Agg")
    for name, draw in PLOTS.items():
        draw(RESULTS / name)


# ---------------------------------------------------------------- files


@dataclass
class Outcome:
    path: Path
    old: str
    new: str


def readmes() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "services").glob("*/README.md")),
        *sorted(RESULTS.glob("*.md")),  # result pages with generated tables
    ]


def render_file(path: Path) -> Outcome:
    old = path.read_text()

    def replace(match: re.Match[str]) -> str:
        body = render_block(match["name"], path)
        return f"{match[1]}{body}{match[4]}"

    return Outcome(path, old, BLOCK.sub(replace, old))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on drift")
    args = parser.parse_args(argv)
    stale = []
    for path in readmes():
        outcome = render_file(path)
        if outcome.new == outcome.old:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.write_text(outcome.new)
    if not args.check:
        write_plots()
    if args.check and stale:
        print(f"out of date (run scripts/render_docs.py): {stale}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
