"""`metatune kb build` trains for real, survives a kill (nothing lost, nothing trained twice) and
its shards (or a parallel build's workers) merge into one knowledge base; its profiles are the
profiler's own; `kb fit-stopper` fits from the seed; `--json` reports each."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metatune.contracts import MetaFeatures
from metatune.knowledge.records import KB_SCHEMA_VERSION, KbRun
from metatune.models import EMBEDDED_MODEL
from metatune_kb.adapters.build import BuildSettings, build, profile
from tests.support.waiting import wait_for_sync

pytestmark = pytest.mark.slow  # builds a knowledge base by training

WORDS = {
    "pos": ["good", "great", "lovely", "fine", "superb", "nice", "excellent", "pleasant"],
    "neg": ["bad", "awful", "poor", "terrible", "nasty", "grim", "dull", "horrid"],
}


def tiny_dataset(path: Path, pair: bool = False) -> Path:
    rows = []
    for i in range(60):
        label = "pos" if i % 2 else "neg"
        words = WORDS[label]
        row = {"text": f"{words[i % 8]} movie {words[(i * 3) % 8]} plot", "label": label}
        if pair:
            row["text_pair"] = f"it was {words[(i + 1) % 8]}"
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def build_command(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "metatune_cli.cli",
        "kb",
        "build",
        "--data",
        str(data),
        "--out",
        str(out),
        "--configs",
        "2",
        "--max-steps",
        "4",
        "--evaluations",
        "2",
        "--train-rows",
        "40",
        "--val-rows",
        "20",
        "--repeat-configs",
        "1",
        "--repeat-seeds",
        "14",
        "--repeat-datasets",
        "1",
        *extra,
    ]


def runs_in(path: Path) -> list[KbRun]:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    header = json.loads(lines[0])
    assert (
        header["kind"] == "metatune-knowledge-base"
        and header["schema_version"] == KB_SCHEMA_VERSION
    )
    return [KbRun.model_validate_json(line) for line in lines[1:]]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "text"
    folder.mkdir()
    tiny_dataset(folder / "alpha.jsonl")
    tiny_dataset(folder / "beta.jsonl", pair=True)
    return folder


@pytest.mark.parametrize("pair", [False, True], ids=["text", "pair"])
def test_the_builds_profile_is_what_metatune_profile_prints(
    data: Path, tmp_path: Path, pair: bool
) -> None:
    """The build profiles in its own process, through the profiler's code: the same meta-features
    as the service's command, and cached (a second call reads the cache, not the data)."""
    source = data / ("beta.jsonl" if pair else "alpha.jsonl")
    command = [sys.executable, "-m", "metatune_cli.cli", "profile", str(source), "--json"]
    command += ["--text-column", "text", "--label-column", "label"]
    if pair:
        command += ["--text-pair-column", "text_pair"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    printed = MetaFeatures.model_validate(json.loads(done.stdout)["features"])
    cache = tmp_path / "profile.json"
    assert profile(source, cache, EMBEDDED_MODEL, pair=pair) == printed
    assert MetaFeatures.model_validate_json(cache.read_text()) == printed
    source.unlink()  # the cache answers now
    assert profile(source, cache, EMBEDDED_MODEL, pair=pair) == printed


def test_a_killed_build_resumes_with_every_run_stored_once(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "kb.jsonl"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        build_command(data, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )

    def first_run_stored_or_ended() -> bool:  # kill it once the first run is stored
        return proc.poll() is not None or (out.exists() and len(out.read_text().splitlines()) >= 2)

    wait_for_sync(first_run_stored_or_ended, "the build storing its first run", timeout=300)
    assert proc.poll() is None, (
        f"the build ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    before = runs_in(out)
    assert 1 <= len(before) < 5
    with out.open("a") as handle:  # a line torn by the kill is dropped on resume, not kept half
        handle.write('{"run_id": "seed-kb:alpha:c001:s13", "datas')
    done = subprocess.run(
        build_command(data, out), env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    after = runs_in(out)
    ids = [run.run_id for run in after]
    assert len(ids) == len(set(ids)) == 5  # 2 datasets x 2 configs + 1 repeat with another seed
    assert [run.run_id for run in after[: len(before)]] == [
        run.run_id for run in before
    ]  # nothing retrained
    for run in after:
        assert run.status.value == "completed" and run.steps == 4 and run.metric is not None
        assert [point.step for point in run.curve] == [0, 2, 4] and run.curve[-1].fraction == 1.0
        assert (
            run.dataset.features is not None
            and run.dataset.features.n_examples == run.dataset.n_train
        )
        assert run.majority_baseline is not None and run.tokens_with_padding >= run.tokens > 0
        assert run.provenance.source == "seed-kb" and run.hardware is not None
    assert {run.task for run in after} == {"classification", "pair_classification"}
    assert (
        "movie" not in out.read_text() and "superb" not in out.read_text()
    )  # meta-features only, never text


def test_sharded_builds_merge_into_one_knowledge_base(data: Path, tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    shards = [tmp_path / f"shard{k}.jsonl" for k in range(2)]
    for k, shard in enumerate(shards):
        small = ("--configs", "1", "--repeat-configs", "0")  # the last value of an option wins
        done = subprocess.run(
            [
                *build_command(
                    data,
                    shard,
                    "--shard",
                    f"{k}/2",
                    "--work-dir",
                    str(tmp_path / f"w{k}"),
                    *small,
                    "--json",
                )
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout) == {
            "out": str(shard),
            "total": 1,
            "done_before": 0,
            "trained": 1,
            "failed": 0,
            "skipped_datasets": {},
        }  # the progress bar went to stderr
    merged = tmp_path / "kb.jsonl"
    for added in (2, 0):  # merging twice adds nothing the second time
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "metatune_cli.cli",
                "kb",
                "merge",
                str(merged),
                *map(str, shards),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"out": str(merged), "added": added, "total": 2}
    ids = [run.run_id for run in runs_in(merged)]
    assert sorted(ids) == ["seed-kb:alpha:c000:s13", "seed-kb:beta:c000:s13"]
    assert [len(runs_in(shard)) for shard in shards] == [1, 1]


def test_fit_stopper_json_names_what_it_fitted(tmp_path: Path) -> None:
    seed = (
        Path(__file__).parents[2]
        / "services/recommender/src/metatune_recommender/data/seed_kb.jsonl"
    )
    out = tmp_path / "stopper.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metatune_cli.cli",
            "kb",
            "fit-stopper",
            "--kb",
            str(seed),
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    provenance = json.loads(out.read_text())["provenance"]
    assert report | {"out": str(out), "kb": str(seed), "metric": "accuracy"} == report
    assert (report["runs"], report["datasets"]) == (
        provenance["runs"],
        provenance["datasets"],
    ) and report["datasets"] > 1


def test_an_epochs_budget_gives_every_batch_size_the_same_examples(
    data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "kb.jsonl"
    done = subprocess.run(
        build_command(
            data,
            out,
            "--datasets",
            "alpha",
            "--epochs",
            "1.5",
            "--local-configs",
            "1",
            "--repeat-configs",
            "0",
        ),
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    header = json.loads(out.read_text().splitlines()[0])
    assert (
        header["provenance"]["budget"] | {"epochs": 1.5, "max_steps": None}
        == (header["provenance"]["budget"])
    )
    assert header["provenance"]["design"]["local_configs"] == 1
    runs = runs_in(out)
    assert sorted(run.run_id for run in runs) == [
        "seed-kb:alpha:c000:s13",
        "seed-kb:alpha:c001:s13",
        "seed-kb:alpha:d000:s13",
    ]
    for run in runs:
        batch = run.config["batch_size"]
        assert run.config["epochs"] == 1.5 and run.config["max_steps"] is None
        assert run.dataset.n_train is not None
        steps = math.ceil(1.5 * run.dataset.n_train / batch)  # 60 examples, whatever the batch
        assert run.steps == run.planned_steps == steps
        every = max(1, steps // 2)
        assert [p.step for p in run.curve] == sorted({0, *range(every, steps + 1, every), steps})


def test_a_parallel_build_trains_each_planned_run_once_and_resumes(
    data: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = tmp_path / "kb.jsonl"
    extra = ("--workers", "2", "--id-prefix", "seed-kb-test", "--work-dir", str(tmp_path / "w"))
    for trained in (5, 0):  # 2 configurations on 2 datasets and 1 repeat; the second start: none
        done = subprocess.run(
            build_command(data, out, *extra, "--json"),
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert (report["trained"], report["failed"], report["total"]) == (trained, 0, 5)
    ids = sorted(run.run_id for run in runs_in(out))
    assert ids == [
        "seed-kb-test:alpha:c000:s13",
        "seed-kb-test:alpha:c000:s14",
        "seed-kb-test:alpha:c001:s13",
        "seed-kb-test:beta:c000:s13",
        "seed-kb-test:beta:c001:s13",
    ]
    parts = sorted((tmp_path / "w" / "parts").glob("part-*.jsonl"))
    assert [p.name for p in parts] == ["part-00-of-02.jsonl", "part-01-of-02.jsonl"]
    assert sum(len(runs_in(p)) for p in parts) == 5  # each run trained by one worker only


def test_no_run_starts_after_the_deadline(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "kb.jsonl"
    settings = BuildSettings(
        data_dir=data,
        out=out,
        work_dir=tmp_path / "w",
        configs=1,
        max_steps=4,
        train_rows=40,
        val_rows=20,
        repeat_configs=0,
        deadline=time.time() - 1,
    )
    report = build(settings)
    assert (report.total, report.trained, report.failed) == (2, 0, 0)
    assert runs_in(out) == []  # the header only: a later start trains both
