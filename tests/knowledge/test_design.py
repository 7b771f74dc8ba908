"""The build's design: a shared Sobol design on every dataset, each dataset's own design beside it,
repeats with other seeds on every dataset, stable run ids; the first seed's plan is unchanged."""

from __future__ import annotations

from metatune.knowledge.space import Budget
from metatune_kb.domain.design import plan_runs

NAMES = ["alpha", "beta", "gamma"]


def test_shared_and_local_designs_with_repeats_on_every_dataset() -> None:
    budget = Budget(max_steps=None, epochs=2.0)
    plan = plan_runs(
        NAMES,
        configs=4,
        local_configs=3,
        budget=budget,
        repeat_configs=2,
        repeat_seeds=(14, 15),
        repeat_datasets=len(NAMES),
    )
    ids = [run.run_id for run in plan]
    assert len(ids) == len(set(ids)) == 3 * (4 + 3 + 2 * 2)
    shared = {
        run.dataset: [r.config for r in plan if r.dataset == run.dataset and r.design == "c"]
        for run in plan
    }
    local = {
        name: [r.config for r in plan if r.dataset == name and r.design == "d"] for name in NAMES
    }
    assert (
        shared["alpha"] == shared["beta"] == shared["gamma"]
    )  # matched: the same points everywhere
    assert local["alpha"] != local["beta"] and not set(map(str, local["alpha"])) & set(
        map(str, shared["alpha"][:4])
    )  # each dataset's own points, seeded by its name
    assert all(c.epochs == 2.0 and c.max_steps is None for c in shared["alpha"] + local["alpha"])
    repeats = [r for r in plan if r.seed != 13]
    assert {(r.dataset, r.config_index, r.seed) for r in repeats} == {
        (name, index, seed) for name in NAMES for index in (0, 1) for seed in (14, 15)
    }
    # a partial build measures the noise early: the repeats follow the configurations they repeat
    first_repeat = ids.index(repeats[0].run_id)
    assert ids[:first_repeat] == [
        f"seed-kb:{name}:{kind}{index:03d}:s13"
        for index in (0, 1)
        for kind in "cd"
        for name in NAMES
    ]
    again = plan_runs(
        NAMES,
        configs=4,
        local_configs=3,
        budget=budget,
        repeat_configs=2,
        repeat_seeds=(14, 15),
        repeat_datasets=len(NAMES),
    )
    assert again == plan  # stable: a resumed build recognises its runs


def test_without_local_configurations_the_first_seeds_plan_is_unchanged() -> None:
    plan = plan_runs(
        NAMES,
        configs=2,
        budget=Budget(max_steps=64),
        repeat_configs=1,
        repeat_seeds=(14,),
        repeat_datasets=2,
    )
    assert [run.run_id for run in plan] == [
        "seed-kb:alpha:c000:s13",
        "seed-kb:beta:c000:s13",
        "seed-kb:gamma:c000:s13",
        "seed-kb:alpha:c001:s13",
        "seed-kb:beta:c001:s13",
        "seed-kb:gamma:c001:s13",
        "seed-kb:alpha:c000:s14",
        "seed-kb:beta:c000:s14",
    ]
    assert all(run.config.max_steps == 64 for run in plan)
