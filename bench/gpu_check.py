"""GPU check: what the trainer-agent does on a CUDA machine, measured in one call.

Five parts, each through the agent's own code (``run_training``, its NVML counter, its
multi-device run, its heartbeat), each written to the JSON as it finishes (``ran``, ``skipped``
with the reason, or ``failed`` with the error):

* ``precision``: the trainer bench's loops (bench/trainer_bench.py) on the device: the naive loop,
  then the agent's loop in fp32, bf16 and fp16 autocast (fp16 with a grad scaler); useful
  (non-padding) tokens per second of optimizer steps, the speed-up against fp32, the final
  validation loss, and which precision ``auto`` picks here;
* ``energy``: the GPU's NVML energy counter over a training run against its power reading
  sampled every 50 ms and integrated (trapezoid) over the same interval, beside what the run
  charged itself (above idle);
* ``shared_gpu``: two trials at once on one device, threads of one process as the agent's executor
  runs them, against one alone: each one's tokens/s, the pair's sum, peak device memory;
* ``multi_device``: one trial on every GPU (torchrun, DDP over NCCL: the agent's
  ``MultiDeviceRun``) against the same trial on one;
* ``heartbeat``: the ``AgentStatus`` the agent publishes every 5 s, built by the agent of
  ``fra1`` on this machine: its device, model, memory and GPU count.

    bench/gpu_check.sh [--out DIR] [--quick] [--data FILE] [--parts precision energy ...]

On a machine without CUDA it runs what a CPU can (fp32 and bf16, two trials sharing the CPU, the
heartbeat) and says why it skips the rest. ``--quick``: a few steps on a small slice (minutes on
a 2-core CPU); the default is sized to finish within 8 minutes on one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from metatune.clock import RealClock
from metatune.contracts import LoraConfig, TaskType
from metatune.settings import Settings
from metatune_trainer_agent.adapters.devices import LocalDevice, device_for
from metatune_trainer_agent.adapters.energy_counters import NvmlCounter, detect_counter
from metatune_trainer_agent.adapters.hardware import cpu_model, nvml_status
from metatune_trainer_agent.adapters.multi_device import MultiDeviceRun
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.app import create_service
from metatune_trainer_agent.domain.carbon import no_intensity
from metatune_trainer_agent.domain.errors import TrainingError
from metatune_trainer_agent.domain.request import TrainingRequest
from metatune_trainer_agent.domain.run import RunHooks, RunOutcome, Site
from metatune_trainer_agent.domain.trainer import autocast_dtype

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import finite, machine
from trainer_bench import Row, variants

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "examples" / "snips_intents_2k.jsonl"  # CC0, in the repository
PARTS = ("precision", "energy", "shared_gpu", "multi_device", "heartbeat")
POWER_SAMPLE_S = 0.05
IDLE_S = 0.5


@dataclass(frozen=True)
class Budget:
    rows: int  # rows of the dataset trained on
    steps: int  # optimizer steps of each run
    energy_steps: int  # steps of the energy run (long enough for many power samples)
    batch_size: int
    max_seq_length: int
    deadline_s: (
        float  # a part that would start after this is skipped (the script's timeout is 470 s)
    )


FULL = Budget(
    rows=2000, steps=200, energy_steps=1000, batch_size=32, max_seq_length=128, deadline_s=400
)
QUICK = Budget(rows=160, steps=4, energy_steps=8, batch_size=8, max_seq_length=64, deadline_s=400)


@dataclass
class Check:
    """What every part needs: the device, the data, the budget, where the JSON goes."""

    device: torch.device
    data: Path
    budget: Budget
    work: Path  # scratch: the data slice, token caches, the agent's data dir
    started: float

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def request(
        self, precision: str = "auto", *, naive: bool = False, steps: int | None = None
    ) -> TrainingRequest:
        """The trainer bench's naive or agent loop at ``precision``, on the slice."""
        options = variants(self.device.type)["naive" if naive else "agent"]
        if not naive:
            options = options.model_copy(update={"precision": precision})
        config = LoraConfig(
            batch_size=self.budget.batch_size,
            max_seq_length=self.budget.max_seq_length,
            max_steps=steps or self.budget.steps,
        )
        return TrainingRequest(
            dataset=self.work / "data.jsonl",
            task=TaskType.classification,
            base_model="all-MiniLM-L6-v2",
            config=config,
            options=options.model_copy(
                update={"device": self.device.type, "cache_dir": self.work / "cache"}
            ),
        )


def train(request: TrainingRequest, gpus: int = 1) -> RunOutcome:
    """One trial, on a thread of its own as the agent's executor runs it (on a loaded CPU, torch in
    the main thread can be several times slower than in a worker thread: alike for every run)."""
    with ThreadPoolExecutor(1, thread_name_prefix="trial") as pool:
        return pool.submit(train_here, request, gpus).result()


def train_here(request: TrainingRequest, gpus: int = 1) -> RunOutcome:
    site = Site(idle_seconds=IDLE_S, gpus=gpus)
    if gpus == 1:
        return run_training(request, site=site)
    return MultiDeviceRun(gpus)(
        request, site=site, clock=RealClock(), intensity=no_intensity, hooks=RunHooks()
    )


def figures(outcome: RunOutcome) -> dict[str, Any]:
    """A run as the JSON reports it (useful tokens/s as the trainer bench counts them)."""
    row = Row("data", "run", outcome)
    return {
        "status": outcome.status,
        "precision": outcome.precision,
        "steps": outcome.step,
        "micro_batch": outcome.micro_batch,
        "useful_tokens": outcome.accounting.tokens_seen,
        "train_s": outcome.train_seconds,
        "useful_tokens_per_s": row.tokens_per_second,
        "val_loss": finite(outcome.evaluation.loss) if outcome.evaluation else None,
    }


def skipped(reason: str, **found: Any) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason, **found}


# ----------------------------------------------------------------------------------- parts
def precision(check: Check) -> dict[str, Any]:
    native = LocalDevice(check.device).native_bf16
    auto = autocast_dtype("auto", check.device, native)
    wanted = ["fp32", "bf16", "fp16"]
    passes: list[dict[str, Any]] = []
    if not check.cuda:
        wanted.remove("fp16")
        passes.append(
            {
                "precision": "fp16",
                "reason": "fp16 autocast with a grad scaler is the CUDA path; no CUDA device",
            }
        )
    elif not native:
        wanted.remove("bf16")
        passes.append(
            {
                "precision": "bf16",
                "reason": f"{torch.cuda.get_device_name(check.device)} has no bf16",
            }
        )
    rows = [{"variant": "naive", **figures(train(check.request(naive=True)))}]
    rows += [{"variant": f"agent+{p}", **figures(train(check.request(p)))} for p in wanted]
    fp32 = next(r for r in rows if r["variant"] == "agent+fp32")["useful_tokens_per_s"]
    for row in rows:
        row["speedup_vs_fp32"] = row["useful_tokens_per_s"] / fp32
    return {
        "status": "ran",
        "auto_picks": {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}[auto],
        "native_bf16": native,
        "rows": rows,
        "skipped": passes,
    }


class PowerSampler:
    """Reads ``counter`` (the agent's NVML counter integrating the power reading) every
    ``POWER_SAMPLE_S`` on a thread, so its integral follows the run."""

    def __init__(self, counter: NvmlCounter) -> None:
        self.counter = counter
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PowerSampler:
        self.start_j = self.counter.joules()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.joules = self.counter.joules() - self.start_j

    def _loop(self) -> None:
        while not self._stop.wait(POWER_SAMPLE_S):
            self.counter.joules()
            self.samples += 1


def energy(check: Check) -> dict[str, Any]:
    if not check.cuda:
        source = detect_counter(check.device, gpu_power_w=300.0).source
        nvml = nvml_status()
        return skipped(
            f"no CUDA device: NVML energy needs a GPU ({nvml.reason or 'NVML answers'}); "
            f"a CPU run is charged by the '{source}' counter",
            cpu_counter=source,
        )
    try:
        counter = NvmlCounter(check.device.index or 0)
        power = NvmlCounter(check.device.index or 0, energy_counter=False)
    except Exception as exc:  # no driver library, no permission
        return skipped(f"NVML unavailable: {type(exc).__name__}: {exc}")
    if not counter.has_energy_counter:
        return skipped(
            "this GPU has no NVML energy counter (before Volta): the agent integrates power itself"
        )
    started, before = time.monotonic(), counter.joules()
    with PowerSampler(power) as sampler:
        outcome = train(check.request(steps=check.budget.energy_steps))
    seconds, counted = time.monotonic() - started, counter.joules() - before
    return {
        "status": "ran",
        "seconds": seconds,
        "counter_wh": counted / 3600,
        "integrated_power_wh": sampler.joules / 3600,
        "power_samples": sampler.samples,
        "relative_difference": (sampler.joules - counted) / counted if counted > 0 else None,
        "mean_power_w": counted / seconds,
        "run_energy_above_idle_wh": outcome.accounting.energy_wh,
        "run_idle_power_w": outcome.accounting.idle_power_w,
        "run_power_source": outcome.accounting.power_source,
        "run": figures(outcome),
    }


def shared_gpu(check: Check) -> dict[str, Any]:
    alone = train(check.request())
    if check.cuda:
        torch.cuda.reset_peak_memory_stats(check.device)
    with ThreadPoolExecutor(2, thread_name_prefix="trial") as pool:
        pair = list(pool.map(train_here, [check.request(), check.request()]))
    trials = [figures(o) for o in pair]
    return {
        "status": "ran",
        "device": str(check.device),
        "alone": figures(alone),
        "trials": trials,
        "pair_useful_tokens_per_s": sum(t["useful_tokens_per_s"] for t in trials),
        "pair_against_alone": sum(t["useful_tokens_per_s"] for t in trials)
        / figures(alone)["useful_tokens_per_s"],
        "peak_memory_mib": torch.cuda.max_memory_allocated(check.device) / 2**20
        if check.cuda
        else None,
    }


def multi_device(check: Check) -> dict[str, Any]:
    gpus = torch.cuda.device_count() if check.cuda else 0
    if gpus < 2:
        where = "no CUDA device" if not check.cuda else "one CUDA device"
        return skipped(
            f"NCCL needs at least 2 CUDA devices, {where} here "
            "(the gloo path on CPU processes: tests/trainer_agent/test_multi_device.py)",
            gpus=gpus,
        )
    one, many = train(check.request()), train(check.request(), gpus=gpus)
    return {
        "status": "ran",
        "backend": "nccl",
        "gpus": gpus,
        "one": figures(one),
        "all": figures(many),
        "speedup": figures(many)["useful_tokens_per_s"] / figures(one)["useful_tokens_per_s"],
    }


def heartbeat(check: Check) -> dict[str, Any]:
    agent = create_service("fra1", Settings(data_dir=check.work / "agent")).runtime
    status = agent.status()
    found = status.model_dump(
        mode="json",
        include={
            "device",
            "device_model",
            "gpus_total",
            "gpus_free",
            "gpu_model",
            "gpu_memory_mib",
        },
    )
    return {"status": "ran", **found, "reports_device": status.device == check.device.type}


# ----------------------------------------------------------------------------------- the call
def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model() or platform.machine() or "cpu"


def slice_data(source: Path, rows: int, target: Path) -> None:
    with source.open(encoding="utf-8") as fh:
        lines = [line for _, line in zip(range(rows), fh, strict=False)]
    target.write_text("".join(lines), encoding="utf-8")


def run_part(name: str, check: Check, report: dict[str, Any]) -> None:
    if time.monotonic() - check.started > check.budget.deadline_s:
        report["parts"][name] = skipped(
            f"the time budget ({check.budget.deadline_s:.0f} s) was spent"
        )
        return
    began = time.monotonic()
    try:
        report["parts"][name] = PART_RUNS[name](check)
    except Exception as exc:
        if not isinstance(exc, TrainingError):  # the run's own refusals say it all in one line
            traceback.print_exc()
        report["parts"][name] = {
            "status": "failed",
            "reason": f"{type(exc).__name__}: {exc}".splitlines()[0],
        }
    report["parts"][name]["wall_s"] = time.monotonic() - began


PART_RUNS: dict[str, Callable[[Check], dict[str, Any]]] = {
    "precision": precision,
    "energy": energy,
    "shared_gpu": shared_gpu,
    "multi_device": multi_device,
    "heartbeat": heartbeat,
}


def environment(device: torch.device) -> dict[str, Any]:
    nvml = nvml_status()
    return {
        "device": device_name(device),
        "device_type": device.type,
        "gpus": torch.cuda.device_count() if device.type == "cuda" else 0,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "pynvml": "installed" if nvml.reason != "nvidia-ml-py is not installed" else "missing",
        "nvml": {
            "available": nvml.available,
            "reason": nvml.reason,
            "gpus": [asdict(g) for g in nvml.gpus],
        },
        "machine": machine(),
        "load_1m_start": os.getloadavg()[0],  # other work on the machine, beside the check
    }


def write(report: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gpu_check.json"
    path.write_text(json.dumps(report, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_out = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "docs" / "results"
    parser.add_argument(
        "--out",
        type=Path,
        default=default_out,
        help="folder of gpu_check.json (default: $OUT if set, else docs/results)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few steps on a small slice (a CPU's minutes)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="a classification JSON-lines file (text, label)",
    )
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument(
        "--json", action="store_true", help="print the report as one JSON object on stdout"
    )
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"error: --data {args.data}: no such file", file=sys.stderr)
        raise SystemExit(2)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    device = device_for("auto")
    budget = QUICK if args.quick else FULL
    report: dict[str, Any] = {
        **environment(device),
        "quick": args.quick,
        "budget": asdict(budget),
        "parts": {},
    }
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        check = Check(device, args.data, budget, Path(scratch), time.monotonic())
        slice_data(args.data, budget.rows, check.work / "data.jsonl")
        for name in args.parts:
            print(f"gpu_check: {name} on {report['device']}", file=sys.stderr, flush=True)
            run_part(name, check, report)
            report["wall_s"] = time.monotonic() - check.started
            report["load_1m_end"] = os.getloadavg()[0]
            write(report, args.out)  # after each part: a killed check still leaves its parts
    if args.json:
        print(json.dumps(report, allow_nan=False))
    else:
        for name, part in report["parts"].items():
            status = part["status"] + (f" ({part['reason']})" if "reason" in part else "")
            print(f"{name}: {status}")
    print(f"wrote {args.out / 'gpu_check.json'}", file=sys.stderr if args.json else sys.stdout)
    return 1 if any(p["status"] == "failed" for p in report["parts"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
