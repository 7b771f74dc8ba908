"""The public HPO tables become knowledge-base runs, as many as the folder's README says."""

from __future__ import annotations

from metatune.knowledge.store import KnowledgeStore
from metatune_kb.adapters.public import import_public
from tests.support.plugin import TEST_DATA

# The row counts the public tables' README gives (its table and file-format notes); the tables are
# shipped whole in tests/support/data/hpo.
README_COUNTS = {
    "nmthpo_zh-en": 118,
    "nmthpo_ja-en": 150,
    "nmthpo_en-ja": 168,
    "nmthpo_sw-en": 767,
    "nmtlc_nmt_scratch_zh-en": 148,
    "nmtlc_nmt_scratch_ja-en": 177,
    "nmtlc_nmt_scratch_en-ja": 179,
    "nmtlc_nmt_scratch_sw-en": 819,
    "nmtlc_nmt_lora_zh-en": 159,
    "deberta_mnli": 1024,
    "peft_metamathqa": 63,
}


def test_importer_reads_the_counts_the_readme_gives() -> None:
    imported = import_public(TEST_DATA / "hpo")
    assert imported.tables == README_COUNTS
    assert len({run.run_id for run in imported.runs}) == sum(README_COUNTS.values())
    by_id = {run.run_id: run for run in imported.runs}
    lora = [run for run in imported.runs if run.provenance.source == "public:nmtlc_nmt_lora_zh-en"]
    best = max(
        lora, key=lambda run: run.metric
    )  # README: best = bloomz-3b, r=2, batch 64, lr 2e-5, 10.84 BLEU
    assert (
        best.base_model,
        best.config["r"],
        best.config["batch_size"],
        best.config["initial_lr"],
    ) == ("bloomz-3b", 2, 64, 2e-5)
    assert best.metric == 10.84 and best.curve and best.curve[-1].fraction == 1.0
    deberta = [run for run in imported.runs if run.task == "deberta-base_mnli"]
    assert round(max(run.metric for run in deberta), 3) == 0.890  # README: max 0.890
    assert all(
        run.dataset.descriptors["lang_pair"] and run.dataset.features is None
        for run in imported.runs
    )
    scratch = by_id["public:nmtlc_nmt_scratch_zh-en:0"]
    assert scratch.metric_name == "neg_perplexity" and scratch.metric < 0  # higher is better
    assert by_id["public:nmthpo_sw-en:0"].dataset.descriptors["train_size_examples"] == 24000


async def test_public_import_into_the_store_is_idempotent(store: KnowledgeStore) -> None:
    runs = import_public(TEST_DATA / "hpo").runs
    assert await store.add_runs(runs) == sum(README_COUNTS.values())
    assert await store.add_runs(runs) == 0
    stats = await store.stats()
    assert stats.runs_per_source == {
        f"public:{table}": n for table, n in sorted(README_COUNTS.items())
    }
