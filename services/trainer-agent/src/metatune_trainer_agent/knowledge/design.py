"""The build's experimental design: which configuration trains on which dataset, with which seed.

Pure (no torch): a scrambled Sobol sequence over the search space of
:mod:`metatune.knowledge.space`, the same configurations for every dataset (a "matched" design,
so datasets can be compared configuration by configuration), plus repeats of the first few
configurations with other seeds to measure run-to-run noise. Run ids are stable, so a resumed
build recognises what it already trained.
"""

from __future__ import annotations

from dataclasses import dataclass

from scipy.stats import qmc

from metatune.contracts import LoraConfig
from metatune.knowledge.space import DIMENSIONS, Budget, decode


@dataclass(frozen=True)
class PlannedRun:
    run_id: str
    dataset: str
    config_index: int
    seed: int
    config: LoraConfig


def sobol_configs(
    n: int, *, budget: Budget, design_seed: int = 0, seed: int = 13
) -> list[LoraConfig]:
    """``n`` configurations from a scrambled Sobol sequence (seeded: the same n give the same list)."""
    sampler = qmc.Sobol(d=len(DIMENSIONS), scramble=True, seed=design_seed)
    points = sampler.random(n)
    return [decode(point, budget=budget, seed=seed) for point in points]


def plan_runs(
    datasets: list[str],
    *,
    configs: int,
    budget: Budget,
    repeat_configs: int = 0,
    repeat_seeds: tuple[int, ...] = (),
    repeat_datasets: int = 0,
    design_seed: int = 0,
    seed: int = 13,
) -> list[PlannedRun]:
    """Every run of the build, ordered so that any prefix covers every dataset evenly: configuration
    0 on each dataset, then configuration 1, ..., then the repeats."""
    design = sobol_configs(configs, budget=budget, design_seed=design_seed, seed=seed)
    runs = [
        PlannedRun(f"seed-kb:{name}:c{index:03d}:s{seed}", name, index, seed, config)
        for index, config in enumerate(design)
        for name in datasets
    ]
    for extra_seed in repeat_seeds:
        for index in range(min(repeat_configs, configs)):
            for name in datasets[:repeat_datasets]:
                config = design[index].model_copy(update={"seed": extra_seed})
                runs.append(
                    PlannedRun(
                        f"seed-kb:{name}:c{index:03d}:s{extra_seed}",
                        name,
                        index,
                        extra_seed,
                        config,
                    )
                )
    return runs
