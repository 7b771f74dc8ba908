"""``metatune demo``, step by step: start the platform, submit three studies, follow them on the
bus until every trial has finished, then the closing table from what the platform recorded,
asked through the services' interfaces (telemetry's read API, the recommender on the bus).

Each step has a name and the log of the service it waits on; a step that fails raises
:class:`DemoStepFailed` naming both, so the user knows where to look.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

import httpx
from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.js.api import DeliverPolicy
from nats.js.client import JetStreamContext
from rich.console import Console
from rich.live import Live

from metatune import subjects
from metatune.bus import DATASETS_BUCKET, ObjectStore, headers_for
from metatune.bus.auth import ADMIN, SUBMITTER
from metatune.bus.clock import load_anchor
from metatune.bus.connection import connect_as
from metatune.bus.streams import stream_for
from metatune.clock import SimulatedClock
from metatune.contracts import (
    DatasetLocation,
    DatasetSubmitted,
    KnowledgeEvidence,
    KnowledgeEvidenceReply,
    KnowledgeRuns,
    KnowledgeRunsReply,
    StudySpec,
)
from metatune.dashboard_tokens import read_tokens, tokens_dir
from metatune.display import chance_baseline
from metatune.errors import MetaTuneError
from metatune.settings import Settings

from ..settings import CliSettings
from . import stack, view
from .observer import DemoState, JobView, StudyView, contract_of
from .receiver import WebhookReceiver
from .scenario import DemoScenario, DemoStudy, demo_registry
from .summary import StudyRow, closing_table

DEFAULT_DATA = Path("examples/demo")
# the recommender answers from its fitted knowledge base: the first answer may fit it
EVIDENCE_TIMEOUT_S = 300.0


class DemoStepFailed(MetaTuneError):
    """One step of the demo did not happen; ``log`` is where the service responsible wrote why."""

    def __init__(self, step: str, reason: str, log: Path | None) -> None:
        self.step, self.reason, self.log = step, reason, log
        where = f"; see {log}" if log else ""
        super().__init__(f"step '{step}' failed: {reason}{where}")


def webhook_secret(seed: int) -> str:
    """A Standard Webhooks secret of the run (derived from the seed: the demo is a demo)."""
    key = hashlib.sha256(f"metatune-demo-{seed}".encode()).digest()
    return "whsec_" + base64.b64encode(key).decode()


class Demo:
    def __init__(
        self,
        scene: DemoScenario,
        data: Path,
        base: Settings,
        console: Console,
        start_platform: Callable[[CliSettings], None],
        restart: Callable[[CliSettings, str], None],
    ) -> None:
        """``start_platform``: what ``metatune up --simulate`` does, with the demo's settings;
        ``restart``: what ``metatune restart INSTANCE`` does."""
        self.scene, self.data, self.base, self.console = scene, data, base, console
        self.start_platform, self.restart = start_platform, restart
        self.outage: dict[str, Any] = {}
        self.evidence: dict[str, Any] = {}
        self.evidence_job: asyncio.Task[dict[str, Any]] | None = None
        self.folder = stack.demo_data_dir(base)
        self.settings: CliSettings | None = None
        self.receiver: WebhookReceiver | None = None
        self.studies: dict[UUID, DemoStudy] = {scene.study_id(s): s for s in scene.studies}
        self.state = DemoState(
            studies={sid: StudyView(sid, s.name) for sid, s in self.studies.items()}
        )
        self.timings: dict[str, float] = {}
        self.kb_runs = 0
        self.kb_counts: dict[str, int] = {}  # study id -> its runs in the knowledge base
        self.bus: Client | None = None  # the admin's connection while the studies run
        self.started = time.monotonic()

    # ----------------------------------------------------------------- helpers
    def log_of(self, instance: str) -> Path:
        """A service's log (``run``: the folder of every log)."""
        run = self.folder / "run"
        return run if instance == "run" else run / f"{instance}.log"

    def say(self, line: str) -> None:
        """What a step did, for a step that shows no table: never a section of its rule alone."""
        self.console.print(line, highlight=False, soft_wrap=True)

    @contextmanager
    def step(self, name: str, log: str | None = None) -> Iterator[None]:
        """A named step: its duration is kept; what fails inside it becomes DemoStepFailed
        naming the step and ``log`` (a service's instance, or ``run`` for the folder of logs)."""
        self.console.rule(f"[bold]{name}")
        t0 = time.monotonic()
        try:
            yield
        except (DemoStepFailed, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raise DemoStepFailed(
                name, f"{type(exc).__name__}: {exc}", self.log_of(log) if log else None
            ) from exc
        finally:
            self.timings[name] = round(time.monotonic() - t0, 1)

    # ----------------------------------------------------------------- the run
    def run(self) -> dict[str, Any]:
        secret = webhook_secret(self.scene.seed)
        with self.step("set-up"):
            env = stack.prepare(self.base, self.scene, secret)
            files = self._write_datasets()
            self.say(
                f"{len(files)} datasets of {self.scene.rows} rows each in {self.folder / 'datasets'}"
            )
        with self.step("platform", log="run"):
            self.settings = stack.apply(env)
            stack.write_cli_env(env)
            try:
                self._start_platform()
            except BaseException:
                stack.stop_platform(self.settings)
                raise
            self.say(f"NATS, PostgreSQL and every service up; their logs in {self.log_of('run')}")
        with self.step("webhook receiver"):
            self.receiver = WebhookReceiver(secret, self.folder / "webhooks" / "deliveries.jsonl")
            self.receiver.start()
            self.console.print(f"receiving signed webhooks at {self.receiver.url}")
        try:
            return asyncio.run(self._follow(files))
        finally:
            self.receiver.stop()

    def _write_datasets(self) -> dict[str, Path]:
        """The committed slices, cut to the scenario's rows, in the demo folder."""
        out = self.folder / "datasets"
        out.mkdir(parents=True)
        files = {}
        for study in self.scene.studies:
            source = self.data / study.file
            lines = source.read_text(encoding="utf-8").splitlines()[: self.scene.rows]
            target = out / study.file
            target.write_text("\n".join(lines) + "\n", encoding="utf-8")
            files[study.name] = target
        return files

    def _start_platform(self) -> None:
        assert self.settings is not None
        self.start_platform(self.settings)

    async def _follow(self, files: dict[str, Path]) -> dict[str, Any]:
        assert self.settings is not None
        settings = self.settings
        admin = await connect_as(settings, ADMIN)
        self.bus = admin
        try:
            js = admin.jetstream()
            stop = asyncio.Event()
            reader = asyncio.create_task(self._read_bus(js, stop))
            try:
                with self.step("submit studies"):
                    await self._submit(settings, files)
                await self._wait_steps()
            finally:
                stop.set()
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
        finally:
            self.bus = None
            await admin.close()
        with self.step("6. knowledge-base evidence", log="run"):
            assert self.evidence_job is not None
            self.evidence = await self.evidence_job
            found = sum("error" not in e for e in self.evidence.values())
            self.say(f"the knowledge base's nearest datasets and their best runs: {found} studies")
        with self.step("6. closing table", log="telemetry"):
            async with self._telemetry() as client:
                rows = await closing_table(
                    client,
                    {sid: s.name for sid, s in self.studies.items()},
                    demo_registry(),
                    self.kb_counts,
                )
                disclosures = await self._disclosures(client)
            for row in rows:
                profile = self.state.studies[UUID(row.study_id)].profile
                row.chance_baseline = chance_baseline(
                    profile.features.n_classes if profile is not None else None
                )
            self.say(f"{len(rows)} studies read through telemetry's read API and the recommender")
        result = self._result(rows, disclosures)
        (self.folder / "summary.json").write_text(json.dumps(result, indent=2, default=str))
        return result

    async def _live(self, until: Callable[[], bool]) -> None:
        """While training runs: a live table on a terminal; elsewhere (CI, a pipe) each new event
        line as it comes."""
        if self.console.is_terminal:
            with Live(
                view.training(self), console=self.console, refresh_per_second=2, transient=True
            ) as live:
                while not until():
                    await asyncio.sleep(0.5)
                    live.update(view.training(self))
            return
        shown = 0
        while not until():
            await asyncio.sleep(1.0)
            for line in self.state.log[shown:]:
                self.console.print(line, highlight=False)
            shown = len(self.state.log)

    async def _read_bus(self, js: JetStreamContext, stop: asyncio.Event) -> None:
        """Every event of the log from the first, in order, folded into the state."""
        assert self.settings is not None
        sub = await js.subscribe(
            subjects.EVERYTHING,
            stream=self.settings.stream_name,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
        )
        while not stop.is_set():
            try:
                msg = await sub.next_msg(timeout=1.0)
            except TimeoutError:
                continue
            except Exception as exc:  # nats raises its own timeout type
                if "Timeout" in type(exc).__name__:
                    continue
                raise
            model = contract_of(msg.subject)
            if model is None:
                continue
            try:
                event = model.model_validate_json(msg.data)
            except ValueError:
                continue  # telemetry records invalid messages; the demo shows valid ones
            self.state.apply(msg.subject, event)

    async def _submit(self, settings: Settings, files: dict[str, Path]) -> None:
        nc = await connect_as(settings, SUBMITTER)
        try:
            js = nc.jetstream()
            anchor = await load_anchor(js)
            if anchor is None:
                raise RuntimeError("the platform has no simulated clock")
            clock = SimulatedClock(anchor)
            objects = ObjectStore(js)
            assert self.receiver is not None
            for study_id, study in self.studies.items():
                path = files[study.name]
                key = f"studies/{study_id}/{path.name}"
                sha = await objects.put_file(DATASETS_BUCKET, key, path)
                now = clock.now()
                spec = StudySpec(
                    name=study.name,
                    dataset=DatasetLocation(
                        kind="object", ref=key, size_bytes=path.stat().st_size, sha256=sha
                    ),
                    task=study.task,
                    base_model=self.scene.base_model,
                    deadline=now + timedelta(hours=self.scene.deadline_h),
                    trials=study.trials,
                    budget=self.scene.budget,
                    region_group=study.region_group,
                    home_datacenter=study.home_datacenter,
                    webhook_url=self.receiver.url,
                )
                event = DatasetSubmitted(
                    event_id=uuid5(NAMESPACE_URL, f"metatune:demo-submitted:{study_id}"),
                    occurred_at=now,
                    study_id=study_id,
                    spec=spec,
                )
                await js.publish(
                    subjects.DATASETS_SUBMITTED,
                    event.to_bytes(),
                    headers=headers_for(event),
                    stream=stream_for(subjects.DATASETS_SUBMITTED, settings),
                )
                self.console.print(
                    f"submitted {study.name} ({study.language}, {study.task.value}, "
                    f"{self.scene.rows} rows, {study.trials} trials of {spec.budget.describe()}"
                    + (f", residency {study.region_group.value}" if study.region_group else "")
                    + f", home {study.home_datacenter}): study {study_id}"
                )
        finally:
            await nc.close()

    async def _until(
        self, what: str, check: Callable[[], bool | Awaitable[bool]], timeout_s: float
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            result = check()
            if not isinstance(result, bool):
                result = await result
            if result:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not seen on the bus within {timeout_s:.0f} s")
            await asyncio.sleep(0.5)

    async def _wait_steps(self) -> None:
        s = self.state
        with self.step("1. profiles", log="profiler"):
            await self._until(
                "profiles", lambda: all(v.profile is not None for v in s.studies.values()), 180
            )
            self.console.print(view.profiles(self))
        with self.step("2. recommendations", log="recommender"):
            await self._until(
                "recommendations",
                lambda: all(
                    len(v.jobs) >= min(3, self.studies[k].trials) for k, v in s.studies.items()
                ),
                240,
            )
            self.console.print(view.recommendations(self))
            self.evidence_job = asyncio.create_task(self._evidence())
        with self.step("3. plan", log="scheduler"):
            await self._until(
                "plan",
                lambda: s.plan_version is not None and all(j.planned for j in s.jobs.values()),
                120,
            )
            self.console.print(view.runs(self))
        with self.step("4. training", log="run"):
            waiting = asyncio.create_task(self._until("training", s.done, self.scene.timeout_s))
            outage = asyncio.create_task(self._outage())

            def over() -> bool:
                failed = outage.done() and not outage.cancelled() and outage.exception()
                return waiting.done() or bool(failed)

            await self._live(over)
            if not waiting.done():  # the what-if failed: its reason is the step's
                waiting.cancel()
                await outage
            await waiting
            await outage
            self.console.print(view.recommendations(self))
            self.console.print(view.runs(self))
        with self.step("5. knowledge base", log="recommender"):
            await self._until("knowledge base", self._kb_complete, 60)
            self.say(f"{self.kb_runs} runs of these studies in the knowledge base, one a trial")
        with self.step("5. webhooks", log="telemetry"):
            await self._until("webhooks", self._webhooks_complete, 90)
            self.console.print(view.footer(self))

    async def _outage(self) -> None:
        """What-if: the clean datacenter goes dark while a trial trains there. Its agent is
        stopped (it checkpoints the run on the way out); once the scheduler's lease on it expires
        the trial is paused and re-planned, and another datacenter resumes it from the checkpoint.
        The agent is started again when the trial has moved."""
        assert self.settings is not None
        dc, s = self.scene.outage_datacenter, self.state

        def victim() -> JobView | None:
            for job in s.jobs.values():
                if (
                    job.status == "running"
                    and job.datacenter == dc
                    and job.total_steps
                    and job.step >= max(2, job.total_steps // 4)
                ):
                    return job
            return None

        while (job := victim()) is None:
            if s.done():
                return
            await asyncio.sleep(0.25)
        name = s.job_name(job.job_id)
        self.outage = {"datacenter": dc, "job_id": str(job.job_id), "step": job.step}
        s.remark(f"what-if: {dc} goes dark while {name} trains there (step {job.step})")
        await asyncio.to_thread(stack.stop_instance, self.settings, f"trainer-agent.{dc}")
        # With the dark datacenter at capacity 0 the plan must place the trial elsewhere, at the
        # latest when another datacenter frees up or its deadline has passed (run late): bound
        # the wait by the trials' own window, not a guess.
        bound_s = self.scene.timeout_s
        deadline = time.monotonic() + bound_s
        while not (job.finished or (job.visited and job.visited[-1] != dc)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not move away from {dc} within {bound_s:.0f} s")
            await asyncio.sleep(0.5)
        s.remark(f"what-if over: {dc} is back")
        await asyncio.to_thread(self.restart, self.settings, f"trainer-agent.{dc}")

    async def _evidence(self) -> dict[str, Any]:
        """What the knowledge base measured on the datasets nearest each study's, as the
        recommender answers it (``metatune.requests.knowledge.evidence``), per study id."""
        assert self.bus is not None
        request = KnowledgeEvidence(study_ids=list(self.studies))
        try:
            msg = await self.bus.request(
                subjects.KNOWLEDGE_EVIDENCE,
                request.model_dump_json().encode(),
                timeout=EVIDENCE_TIMEOUT_S,
            )
        except (NoRespondersError, TimeoutError) as exc:  # nats' own timeout is one
            raise RuntimeError(
                f"the recommender did not answer {subjects.KNOWLEDGE_EVIDENCE} within "
                f"{EVIDENCE_TIMEOUT_S:.0f} s ({type(exc).__name__})"
            ) from exc
        reply = KnowledgeEvidenceReply.model_validate_json(msg.data)
        return {
            str(study): evidence.model_dump(mode="json", exclude_none=True)
            for study, evidence in reply.evidence.items()
        }

    async def _kb_complete(self) -> bool:
        """Every finished trial is a row of the knowledge base, as the recommender counts them
        (``metatune.requests.knowledge.runs``; no answer yet: not yet)."""
        assert self.bus is not None
        request = KnowledgeRuns(study_ids=list(self.studies))
        try:
            msg = await self.bus.request(
                subjects.KNOWLEDGE_RUNS, request.model_dump_json().encode(), timeout=10
            )
        except (NoRespondersError, TimeoutError):  # nats' own timeout is one
            return False
        counts = KnowledgeRunsReply.model_validate_json(msg.data).runs
        self.kb_counts = {str(study): n for study, n in counts.items()}
        self.kb_runs = sum(counts.values())
        return self.kb_runs >= sum(1 for j in self.state.jobs.values() if j.finished)

    def _webhooks_complete(self) -> bool:
        """A delivery for every finished trial (job.completed / job.early_stopped / job.failed)."""
        assert self.receiver is not None
        got = {
            d.correlation
            for d in self.receiver.deliveries
            if d.type in ("job.completed", "job.early_stopped", "job.failed")
        }
        return all(str(j) in got for j, v in self.state.jobs.items() if v.finished)

    def _telemetry(self) -> httpx.AsyncClient:
        """A client of telemetry's read API, with the dashboard token where one is written."""
        assert self.settings is not None
        tokens = read_tokens(tokens_dir(self.settings))
        headers = (
            {}
            if tokens is None
            else {"Authorization": f"Bearer {tokens.current.get_secret_value()}"}
        )
        return httpx.AsyncClient(base_url=self.dashboard_url(), headers=headers, timeout=30)

    async def _disclosures(self, client: httpx.AsyncClient) -> dict[str, Any]:
        out = {}
        for study_id in self.studies:
            response = await client.get(
                f"/api/studies/{study_id}/report", params={"format": "json"}
            )
            response.raise_for_status()
            out[str(study_id)] = response.json()
        return out

    def dashboard_url(self) -> str:
        assert self.settings is not None
        return f"http://127.0.0.1:{self.settings.telemetry_http_port}"

    def _result(self, rows: list[StudyRow], disclosures: dict[str, Any]) -> dict[str, Any]:
        assert self.receiver is not None
        deliveries, verified = self.receiver.counts()
        return {
            "seed": self.scene.seed,
            "fast": self.scene.fast,
            "studies": [asdict(r) for r in rows],
            "disclosure": {
                sid: {
                    "kgco2eq": d.get("kgco2eq"),  # realised where observed, else forecast
                    "forecast_kgco2eq": d.get("forecast_kgco2eq"),  # as the agents charged
                    "realised_hours": d.get("realised_hours"),
                    "forecast_priced_hours": d.get("forecast_priced_hours"),
                    "facility_energy_kwh": d.get("facility_energy_kwh"),
                    "pricing": d.get("pricing"),
                }
                for sid, d in disclosures.items()
            },
            "evidence": self.evidence,
            "plan": view.plan_figures(self.state),  # the plan against the meter, from the bus
            "outage": self.outage,
            "pauses": self.state.pauses(),
            "migrations": self.state.migrations(),
            "early_stops": self.state.early_stops(),
            "curve_stops": self.state.curve_stops(),
            "webhooks": {"deliveries": deliveries, "verified": verified},
            "dashboard": self.dashboard_url(),
            "timings_s": self.timings,
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "logs": str(self.folder / "run"),
        }
