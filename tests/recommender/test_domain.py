"""The recommender's pure domain: the learned prior, the top-3, EI and the flywheel, without a bus."""

from __future__ import annotations

import itertools

import numpy as np
import torch
from scipy.stats import spearmanr

from metatune.knowledge.records import DatasetInfo, Hardware, KbRun, Provenance
from metatune.knowledge.space import LR_RANGE, RANKS, encode
from metatune_recommender.domain.acquisition import select_batch
from metatune_recommender.domain.history import Task
from metatune_recommender.domain.portfolio import distinct_picks
from metatune_recommender.domain.prior import LearnedPrior, PriorSettings
from metatune_recommender.domain.recommender import (
    COLD_START,
    KNOWLEDGE_BASE,
    Recommender,
    profile_descriptors,
)
from metatune_recommender.domain.task_weighting import TaskWeighting, misordered_pairs

from .synthetic import OPTIMUM, design, family, features, kb_runs, profile, score, two_kinds_kb

FAST = PriorSettings(iterations=150)


def test_gp_finds_the_known_optimum_of_a_synthetic_meta_dataset() -> None:
    tasks = family(6, 32, seed=1)
    test, pool = tasks[-1], design(256, seed=99)
    shift = 0.2 * (test.descriptors["size"] - 0.5)
    true = np.array([score(c, shift=shift) for c in pool])
    prior = LearnedPrior.fit(tasks[:-1], FAST, extra_configs=pool)
    mu, sd = prior.condition(test.descriptors, [], []).predict(pool)
    assert np.all(np.isfinite(sd)) and np.all(sd > 0)
    assert spearmanr(mu, true).statistic > 0.4  # before any result of this task
    best = int(np.argmax(mu))  # before a single trial of this task: near its optimum
    assert (true.max() - true[best]) / np.ptp(
        true
    ) < 0.25  # in the best quarter of the range, untried
    assert abs(encode(pool[best])[0] - (OPTIMUM[0] + shift)) < 0.2
    # conditioned on a few results of the task, the posterior mean tracks it more closely still
    seen = list(range(0, 256, 32))
    post = prior.condition(test.descriptors, [pool[i] for i in seen], true[seen])
    mu2, _ = post.predict(pool)
    assert spearmanr(mu2, true).statistic >= spearmanr(mu, true).statistic - 0.01


def test_learned_prior_beats_a_flat_prior_on_related_tasks() -> None:
    regrets = {True: [], False: []}
    for seed in range(3):
        tasks = family(6, 32, seed=seed)
        test, pool = tasks[-1], design(128, seed=50 + seed)
        values = np.array([score(c, shift=0.2 * (test.descriptors["size"] - 0.5)) for c in pool])
        for learned in (True, False):
            prior = LearnedPrior.fit(
                tasks[:-1],
                PriorSettings(iterations=150, learned_mean=learned, seed=seed),
                extra_configs=pool,
            )
            picks = select_batch(
                prior.condition(test.descriptors, [], []), prior.inputs(pool, test.descriptors), 3
            )
            regrets[learned].append(values.max() - max(values[p.index] for p in picks))
    assert np.mean(regrets[True]) < np.mean(regrets[False])


def test_top3_are_distinct_inside_the_space_with_predictions_and_costs() -> None:
    advice = Recommender(kb_runs(), settings=FAST).recommend(
        "all-MiniLM-L6-v2", profile_descriptors(features(3000))
    )
    assert advice.source == KNOWLEDGE_BASE and len(advice.recommendations) == 3
    configs = [r.config for r in advice.recommendations]
    assert len({c.model_dump_json() for c in configs}) == 3
    for rec in advice.recommendations:
        assert rec.config.rank in RANKS and LR_RANGE[0] <= rec.config.learning_rate <= LR_RANGE[1]
        assert rec.predicted is not None and rec.std is not None and rec.std >= 0
        assert rec.estimated_gpu_hours > 0 and rec.energy_wh > 0
    assert advice.throughput_device == "cpu"  # measured, from the runs' hardware


def test_ei_continuation_needs_fewer_evaluations_than_random() -> None:
    """On a known function over a finite pool, averaged over seeds: EI from a flat prior fitted on
    related tasks reaches the pool's best 2 % sooner than random search's exact expectation."""
    evals = []
    random_expected = []
    for seed in range(3):
        tasks = family(4, 16, seed=10 + seed)
        pool = design(256, seed=200 + seed)
        values = np.array([score(c) for c in pool])
        target = values >= np.sort(values)[-4]
        prior = LearnedPrior.fit(
            tasks, PriorSettings(iterations=100, learned_mean=False, seed=seed), extra_configs=pool
        )
        x = prior.inputs(pool, {"size": 0.5})
        rng = np.random.default_rng(seed)
        taken = [int(i) for i in rng.choice(len(pool), 2, replace=False)]
        while not target[taken].any() and len(taken) < 60:
            posterior = prior.condition({"size": 0.5}, [pool[i] for i in taken], values[taken])
            taken.append(select_batch(posterior, x, 1, exclude=set(taken))[0].index)
        evals.append(len(taken))
        random_expected.append((len(pool) + 1) / (target.sum() + 1))
    assert np.mean(evals) < np.mean(random_expected)


def test_flywheel_a_completed_run_changes_the_next_recommendation() -> None:
    runs = kb_runs(datasets=3)
    profile = profile_descriptors(features(2000))
    before = (
        Recommender(runs, settings=FAST)
        .recommend("all-MiniLM-L6-v2", profile)
        .recommendations[0]
        .config
    )
    # platform runs on four similar datasets, more than the history holds: a corner of the space
    # far from the old optimum does best on each, so what the knowledge base agrees on moves
    corner = {k: v for k, v in before.model_dump(mode="json").items() if k != "seed"}
    corner.update(
        learning_rate=LR_RANGE[0],
        rank=2,
        alpha=2.0,
        batch_size=8,
        max_steps=64,
        epochs=None,
        max_seq_length=128,
    )
    new = [
        KbRun(
            run_id=f"platform:{j}:{i}",
            dataset=DatasetInfo(name=f"similar{j}", features=features(2100 + 50 * j)),
            base_model="all-MiniLM-L6-v2",
            task="classification",
            config={**c, **(corner if i == 0 else {})},
            metric_name="accuracy",
            metric=0.99 if i == 0 else 0.2,
            provenance=Provenance(source="platform"),
            hardware=Hardware(device="cpu"),  # as the agents report it (kb_rows.completed_run)
        )
        for j in range(4)
        for i, c in enumerate(design(8, seed=7 + j))
    ]
    after = Recommender(runs + new, settings=FAST).recommend("all-MiniLM-L6-v2", profile)
    picked = [(rec.config.learning_rate, rec.config.rank) for rec in after.recommendations]
    # a configuration at the corner (rank 2, a low learning rate) is one of the three bets now
    assert any(rank == 2 and lr < 1e-3 for lr, rank in picked), picked


def test_bad_input_unknown_model_missing_features_and_empty_base() -> None:
    profile = profile_descriptors(features(2000))
    del profile["ttr"]
    profile["zipf_alpha"] = None
    advice = Recommender(kb_runs(datasets=3), settings=FAST).recommend(
        "sentence-transformers/all-MiniLM-L12-v2", profile
    )
    assert advice.source == KNOWLEDGE_BASE and advice.base_model == "all-MiniLM-L6-v2"
    assert advice.warnings and "nearest" in advice.warnings[0]
    assert {"ttr", "zipf_alpha"} <= set(advice.imputed)
    empty = Recommender([]).recommend("all-MiniLM-L6-v2", profile_descriptors(features(2000)))
    assert empty.source == COLD_START and empty.error and len(empty.recommendations) == 3


def test_numerical_failure_answers_with_the_portfolio() -> None:
    recommender = Recommender(kb_runs(datasets=2), settings=FAST)
    prior = recommender.prior("all-MiniLM-L6-v2")
    with torch.no_grad():
        for p in prior.gp.mean.parameters():
            p.fill_(float("nan"))
    advice = recommender.recommend("all-MiniLM-L6-v2", profile_descriptors(features(2000)))
    assert advice.source == COLD_START and "failed" in advice.error


def test_a_task_unlike_its_history_adapts_the_prior_after_enough_results() -> None:
    """Once a task has ADAPT_AFTER results, the kernel and the learned mean's weight are fitted to it:
    a task whose results contradict the history keeps less of the learned mean than one that agrees."""
    from metatune_recommender.domain.adapt import ADAPT_AFTER

    tasks = family(5, 32, seed=3)
    prior = LearnedPrior.fit(tasks, FAST, extra_configs=design(64, seed=5))
    pool = design(64, seed=5)[: ADAPT_AFTER + 4]
    agree = np.array([score(c) for c in pool])
    before = prior.condition({"size": 0.5}, pool[: ADAPT_AFTER - 1], agree[: ADAPT_AFTER - 1])
    assert before.kernel is None  # too few results: the pre-trained hyperparameters
    agreeing = prior.condition({"size": 0.5}, pool, agree)
    contrary = prior.condition({"size": 0.5}, pool, -agree)
    assert agreeing.kernel is not None and contrary.kernel is not None
    assert contrary.mean_weight < agreeing.mean_weight
    mu, sd = contrary.predict(design(16, seed=9))
    assert np.all(np.isfinite(mu)) and np.all(sd > 0)


def _bimodal_history() -> tuple[list[Task], list[dict]]:
    """Two history tasks of one family whose optima lie at opposite ends of one hyperparameter."""
    pool = [{"learning_rate": float(v)} for v in np.logspace(-5, -3, 41)]
    grid = np.log10([c["learning_rate"] for c in pool])
    tasks = [
        Task(
            name=name,
            descriptors={"size": size},
            configs=pool,
            values=-((grid - best) ** 2),
        )
        for name, best, size in (("low", -4.6, 1.0), ("high", -3.4, 2.0))
    ]
    return tasks, pool


def test_top_k_covers_the_related_tasks_instead_of_near_copies() -> None:
    """Two equally similar history tasks disagree on the best learning rate: the top-2 holds each
    one's optimum (a set cover), not two neighbours of one of them. (The learned mean, a third
    source, is left out: interpolating between the two, it would rightly bid for the middle.) The
    prior is trained to convergence, so each history task's posterior knows its own optimum."""
    tasks, pool = _bimodal_history()
    prior = LearnedPrior.fit(
        tasks, PriorSettings(transfer_after=0, own_weight=0.0, opening="cover"), extra_configs=pool
    )
    candidates = prior.inputs(pool, {"size": 1.5})
    posterior = prior.condition({"size": 1.5}, [], [], pool=candidates)
    picks = select_batch(posterior, candidates, 2)
    chosen = sorted(np.log10(pool[p.index]["learning_rate"]) for p in picks)
    assert abs(chosen[0] - (-4.6)) <= 0.15 and abs(chosen[1] - (-3.4)) <= 0.15


def test_the_opening_is_three_distinct_bets_of_the_portfolio_ordered_by_the_prior() -> None:
    """The default opening: the history portfolio (similarity-weighted mean normal score of each
    source's nearest measured row) ranks the pool; walking that ranking, a candidate nearer to a
    pick than the spread's distance is passed over, until k + 1 are picked; the top-k are the k
    of them the task's prior mean ranks highest, in that order. Without the spread the head is
    the ranking's first k + 1, neighbours of one optimum."""
    low, high = _bimodal_history()[0]
    pool = low.configs
    tasks = [low, Task("low2", {"size": 1.2}, pool, low.values), high]
    # a pool of 32 configurations, so a wider spread than the service's 3 % of its pairs
    settings = PriorSettings(iterations=100, opening_spread=0.2)
    prior = LearnedPrior.fit(tasks, settings, extra_configs=pool)
    candidates = prior.inputs(pool, {"size": 1.5})
    posterior = prior.condition({"size": 1.5}, [], [], pool=candidates)
    assert posterior.weights is not None
    order = np.argsort(-prior.portfolio_scores(candidates, posterior.weights[:-1]), kind="stable")
    lr = [float(np.log10(pool[i]["learning_rate"])) for i in range(len(pool))]
    assert abs(lr[order[0]] - (-4.6)) <= 0.15  # two tasks of three
    columns = prior.config_columns(candidates)
    head, apart = distinct_picks(order.tolist(), columns, 4, prior.settings.opening_spread)
    assert apart > 0 and head[0] == order[0] and head != order[:4].tolist()
    picks = select_batch(posterior, candidates, 3)
    mean, _ = posterior.predict_inputs(candidates)
    assert [p.index for p in picks] == sorted(head, key=lambda i: -mean[i])[:3]
    for a, b in itertools.combinations([p.index for p in picks], 2):
        assert np.linalg.norm(columns[a] - columns[b]) >= apart
    assert all(p.reason for p in picks)
    same, _ = distinct_picks(order.tolist(), columns, 4, 0.0)
    assert same == order[:4].tolist()


def test_source_weights_follow_the_task_own_results() -> None:
    """Before results both history tasks weigh alike; results ordered as one of them orders its
    configurations shift the weight to that one (its posterior becomes the task's mean)."""
    tasks, pool = _bimodal_history()
    prior = LearnedPrior.fit(
        tasks, PriorSettings(iterations=100, transfer_after=0), extra_configs=pool
    )
    candidates = prior.inputs(pool, {"size": 1.5})
    before = prior.condition({"size": 1.5}, [], [], pool=candidates)
    assert before.weights is not None and abs(before.weights[0] - before.weights[1]) < 1e-9
    seen = [0, 10, 20, 30, 40]
    after = prior.condition(
        {"size": 1.5}, [pool[i] for i in seen], tasks[1].values[seen], pool=candidates
    )
    assert after.weights is not None and after.weights[1] > 5 * after.weights[0]


def test_only_tasks_of_the_same_search_space_are_sources() -> None:
    """A history task that measured other configurations is no transfer source: on a pool of the
    bimodal tasks' configurations only they weigh; on a pool none of them measured the prior is
    the learned mean alone, as without sources."""
    tasks, pool = _bimodal_history()
    elsewhere = [{"learning_rate": float(v)} for v in np.logspace(-5.01, -3.01, 41)]
    other = Task(
        "other", {"size": 1.5}, elsewhere, -np.log10([c["learning_rate"] for c in elsewhere])
    )
    prior = LearnedPrior.fit(
        [*tasks, other], PriorSettings(iterations=50, transfer_after=0), extra_configs=pool
    )
    same = prior.condition({"size": 1.5}, [], [], pool=prior.inputs(pool, {"size": 1.5}))
    assert same.weights is not None and same.weights[2] == 0 and same.weights[:2].min() > 0
    unseen = [{"learning_rate": float(v)} for v in np.logspace(-5.02, -3.02, 41)]
    alone = prior.condition({"size": 1.5}, [], [], pool=prior.inputs(unseen, {"size": 1.5}))
    assert alone.weights is None
    # the service's pool: a design three times larger plus every measured configuration; the
    # bimodal tasks' rows are all in it (less than half of it), so they are still sources
    wide = [*pool, *unseen, *[{"learning_rate": float(v)} for v in np.logspace(-5.03, -3.03, 41)]]
    served = prior.condition({"size": 1.5}, [], [], pool=prior.inputs(wide, {"size": 1.5}))
    assert served.weights is not None and served.weights[:2].min() > 0


def test_each_misordered_pair_costs_a_source_the_rank_temperature() -> None:
    """Pairs of distinct results a source orders the other way are counted (a tie is no pair),
    and each pair beyond another source's count divides its weight by e^rank_temperature."""
    mu = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0], [1.0, 3.0, 2.0, 4.0]])
    assert misordered_pairs(mu, np.array([1.0, 2.0, 3.0, 4.0])).tolist() == [0, 6, 1]
    assert misordered_pairs(mu, np.array([1.0, 1.0, 3.0, 4.0])).tolist() == [0, 5, 1]
    tasks, pool = _bimodal_history()
    prior = LearnedPrior.fit(tasks, PriorSettings(iterations=100), extra_configs=pool)
    seen = [0, 10, 20, 30, 40]
    x, y = prior.inputs([pool[i] for i in seen], {"size": 1.5}), tasks[1].values[seen]
    candidates = prior.inputs(pool, {"size": 1.5})
    w1, w2 = (
        TaskWeighting(PriorSettings(rank_temperature=t)).weights(
            prior.transfer, {"size": 1.5}, x, y, candidates
        )
        for t in (1.0, 2.0)
    )
    assert w1 is not None and w2 is not None
    wrong = misordered_pairs(prior.source_predictions(x)[0], y)
    assert len(set(wrong.tolist())) > 1  # the sources disagree on the results' order
    # one more degree of temperature: each source's weight relative to the learned mean's
    # moves by e^-1 per pair it mis-orders beyond the learned mean's count
    shift = np.log((w2 / w2[-1]) / (w1 / w1[-1]))
    np.testing.assert_allclose(shift, -(wrong - wrong[-1]), atol=1e-9)


def test_different_profiles_get_the_top3_of_their_own_kind() -> None:
    """The demo's bug: three different datasets got one top-3. In a knowledge base whose intents
    datasets do best at high learning rates and sentiment datasets at low ones, a new intents
    profile and a new sentiment profile (both with fewer rows than every dataset in the base, as
    the demo's are) must get different top-3s, each leaning to its own kind's learning rate."""
    recommender = Recommender(two_kinds_kb(), settings=FAST)
    tops = {}
    for kind in ("intents", "sentiment"):
        advice = recommender.recommend(
            "all-MiniLM-L6-v2", profile_descriptors(profile(kind, 0.02, n_examples=600))
        )
        assert advice.source == KNOWLEDGE_BASE
        tops[kind] = [r.config for r in advice.recommendations]
    keys = {kind: {c.model_dump_json() for c in configs} for kind, configs in tops.items()}
    assert keys["intents"] != keys["sentiment"]
    lr = {
        kind: np.mean([np.log(c.learning_rate) for c in configs]) for kind, configs in tops.items()
    }
    assert lr["intents"] > lr["sentiment"]  # each kind's top-3 leans to where its kind does best


def test_the_top3_does_not_depend_on_how_many_rows_were_profiled() -> None:
    """The seed knowledge base profiled 2,000-row samples and a study may send 600 rows: meta-features
    that grow with the sample (vocabulary, TTR, longest example...) must not make one dataset look
    like another, so one dataset profiled on either gets the same top-3, in the same order."""
    recommender = Recommender(two_kinds_kb(), settings=FAST)
    tops = [
        [
            r.config
            for r in recommender.recommend(
                "all-MiniLM-L6-v2", profile_descriptors(profile("intents", 0.02, n_examples=n))
            ).recommendations
        ]
        for n in (600, 2000)
    ]
    assert tops[0] == tops[1]


def test_batched_pretraining_likelihood_is_each_task_s_own() -> None:
    """Pre-training sums every task's likelihood in one padded batch; a padded row must add
    nothing: each task's figure equals its own unpadded likelihood per point, whatever the lengths
    (here 7 to 32 rows) and with an ensemble of means."""
    tasks = family(4, 32, seed=3)
    tasks = [
        Task(name=t.name, descriptors=t.descriptors, configs=t.configs[:n], values=t.values[:n])
        for t, n in zip(tasks, (32, 7, 19, 26), strict=True)
    ]
    prior = LearnedPrior.fit(tasks, PriorSettings(iterations=5, members=3))
    batch = [
        (prior.inputs(t.configs, t.descriptors), torch.as_tensor(t.values, dtype=torch.float64))
        for t in tasks
    ]
    each = torch.stack([prior.gp.log_likelihood(x, z) / len(z) for x, z in batch])
    torch.testing.assert_close(prior.gp.tasks_log_likelihood(batch), each, rtol=1e-10, atol=1e-10)
