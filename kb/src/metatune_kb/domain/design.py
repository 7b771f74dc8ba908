"""The build's experimental design: which configuration trains on which dataset, with which seed.

Pure (no torch). Two scrambled Sobol designs over the search space of
:mod:`metatune.knowledge.space`:

* a *shared* design, the same configurations for every dataset (a "matched" design, so datasets
  can be compared configuration by configuration; run ids ``c000``, ``c001``, ...);
* a *local* design per dataset, seeded by the dataset's name, so the knowledge base holds more than
  one set of points (run ids ``d000``, ``d001``, ...);

plus repeats of the first few shared configurations with other seeds, to measure the noise between
seeds against the spread between configurations. Run ids are stable, so a resumed build recognises
what it already trained.
"""

from __future__ import annotations

import math
import zlib
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
    design: str = "c"  # "c": the shared design, "d": the dataset's own design


def sobol_configs(
    n: int, *, budget: Budget, design_seed: int = 0, seed: int = 13
) -> list[LoraConfig]:
    """``n`` configurations from a scrambled Sobol sequence (seeded: the same n give the same list)."""
    if n <= 0:
        return []
    sampler = qmc.Sobol(d=len(DIMENSIONS), scramble=True, seed=design_seed)
    points = sampler.random_base2(math.ceil(math.log2(n)))[:n]  # balanced: a power of 2, cut to n
    return [decode(point, budget=budget, seed=seed) for point in points]


def dataset_design_seed(name: str, design_seed: int) -> int:
    """The seed of ``name``'s own design: stable across runs and machines (CRC-32, not ``hash``)."""
    return zlib.crc32(f"{design_seed}:{name}".encode())


def plan_runs(
    datasets: list[str],
    *,
    configs: int,
    budget: Budget,
    local_configs: int = 0,
    repeat_configs: int = 0,
    repeat_seeds: tuple[int, ...] = (),
    repeat_datasets: int = 0,
    design_seed: int = 0,
    seed: int = 13,
    id_prefix: str = "seed-kb",
) -> list[PlannedRun]:
    """Every run of the build, ordered so that any prefix covers every dataset evenly: shared
    configuration 0 on each dataset, then each dataset's own configuration 0, then shared 1, ...

    The repeats (the first ``repeat_configs`` shared configurations with each of ``repeat_seeds``, on
    the first ``repeat_datasets`` datasets) follow the shared configurations they repeat when the
    build has local configurations, so a partial build already measures the noise; without local
    configurations they come last, as in the first seed's build (the same order, the same run ids).

    Run ids are ``{id_prefix}:{dataset}:{c|d}{index}:s{seed}``: give each build its own prefix, so
    that knowledge-base files built apart can be loaded side by side (the store keys runs by id)."""
    shared = sobol_configs(configs, budget=budget, design_seed=design_seed, seed=seed)
    local = {
        name: sobol_configs(
            local_configs,
            budget=budget,
            design_seed=dataset_design_seed(name, design_seed),
            seed=seed,
        )
        for name in datasets
    }
    repeats = [
        PlannedRun(
            f"{id_prefix}:{name}:c{index:03d}:s{extra_seed}",
            name,
            index,
            extra_seed,
            shared[index].model_copy(update={"seed": extra_seed}),
        )
        for extra_seed in repeat_seeds
        for index in range(min(repeat_configs, configs))
        for name in datasets[:repeat_datasets]
    ]
    runs: list[PlannedRun] = []
    for index in range(max(configs, local_configs)):
        if index < configs:
            runs += [
                PlannedRun(
                    f"{id_prefix}:{name}:c{index:03d}:s{seed}", name, index, seed, shared[index]
                )
                for name in datasets
            ]
        if index < local_configs:
            runs += [
                PlannedRun(
                    f"{id_prefix}:{name}:d{index:03d}:s{seed}",
                    name,
                    index,
                    seed,
                    local[name][index],
                    "d",
                )
                for name in datasets
            ]
        if local_configs and index + 1 == min(repeat_configs, configs):
            runs += repeats
            repeats = []
    return runs + repeats
