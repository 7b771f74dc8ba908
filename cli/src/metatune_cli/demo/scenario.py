"""What ``metatune demo`` runs: the datacenters, the three studies and the simulated clock.

Everything here is fixed or derived from ``--seed``, so two runs with one seed submit the same
studies (same ids, same rows) on the same replayed grids from the same simulated hour.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import Field

from metatune.contracts import Contract, RegionGroup, TaskType, TrainingBudget
from metatune.models import EMBEDDED_MODEL
from metatune.registry import Registry, load_registry

DEMO_DATACENTERS = ("fra1", "osl1", "dfw1", "yyz1")
# 2023-06-13 20:00Z: evening in Europe, afternoon in America; the replayed grids then range from
# Norway's 3 gCO2eq/kWh to Texas's 380. The seed moves the start by whole days, so the hours of the
# day (and the story) stay alike while the grids' values change.
SIM_START = datetime(2023, 6, 13, 20, tzinfo=UTC)
LATE_HOURS = 12  # simulated hours past the deadline the demo waits for late trials


class DemoStudy(Contract):
    """One study of the demo: a committed dataset and what its submitter asks for."""

    name: str = Field(description="short name shown in the tables")
    file: str = Field(description="file under the demo data folder")
    task: TaskType
    language: str
    trials: int = Field(ge=1)
    home_datacenter: str = Field(description="the submitter's datacenter: the run-now baseline")
    region_group: RegionGroup | None = Field(None, description="data residency, if any")


STUDIES = (
    DemoStudy(
        name="intents-en",
        file="snips_intents_en.jsonl",
        task=TaskType.classification,
        language="English",
        trials=4,  # above the top-3: the fourth comes by Expected Improvement
        home_datacenter="dfw1",
    ),
    DemoStudy(
        name="sentiment-am",
        file="afrisenti_sentiment_am.jsonl",
        task=TaskType.classification,
        language="Amharic",
        trials=3,
        home_datacenter="fra1",
        region_group=RegionGroup.EU,  # data residency: never leaves the EU
    ),
    DemoStudy(
        name="nli-en",
        file="snli_pairs_en.jsonl",
        task=TaskType.pair_classification,
        language="English",
        trials=3,
        home_datacenter="fra1",
    ),
)


class DemoScenario(Contract):
    """The whole run: derived from the options of ``metatune demo``."""

    seed: int
    fast: bool
    rows: int = Field(description="rows of each dataset submitted")
    seconds_per_hour: float = Field(gt=0, description="real seconds per simulated hour")
    sim_start: datetime
    studies: list[DemoStudy]
    base_model: str = EMBEDDED_MODEL
    max_eval_examples: int = Field(description="held-out examples per evaluation")
    deadline_h: float = Field(
        gt=0, description="every study's deadline, simulated hours after its submission"
    )
    budget: TrainingBudget = Field(
        default_factory=TrainingBudget, description="how long each trial trains"
    )
    outage_datacenter: str = Field(
        "osl1", description="the what-if: this datacenter goes dark while a trial trains there"
    )

    def study_id(self, study: DemoStudy) -> UUID:
        return uuid5(NAMESPACE_URL, f"metatune:demo:{self.seed}:{study.name}")

    @property
    def timeout_s(self) -> float:
        """Real seconds the trials may take: the deadline, then up to 12 late hours (the closing
        table reports how late; past this the demo stops waiting and says so)."""
        return (self.deadline_h + LATE_HOURS) * self.seconds_per_hour


def scenario(seed: int = 0, fast: bool = False) -> DemoScenario:
    """The demo; ``fast``: the same story, shorter (half the rows, one epoch a trial instead of the
    default three, an hour every 15 s), what ``tests/demo`` runs."""
    return DemoScenario(
        seed=seed,
        fast=fast,
        rows=300 if fast else 600,
        seconds_per_hour=15.0 if fast else 36.0,
        sim_start=SIM_START + timedelta(days=seed % 120),
        studies=list(STUDIES),
        max_eval_examples=64 if fast else 128,
        deadline_h=12 if fast else 14,
        budget=TrainingBudget(epochs=1) if fast else TrainingBudget(),
    )


def demo_registry_path() -> Path:
    return Path(str(resources.files("metatune_cli.demo").joinpath("datacenters.toml")))


def demo_registry() -> Registry:
    return load_registry(demo_registry_path())
