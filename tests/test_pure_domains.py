"""Every service's ``domain/`` stays pure: no file, device or model-file I/O, no waiting.

Two gates, both in ``scripts/check``: import-linter's ``domains-without-io`` contract (the
modules that only do I/O: ``os``, ``gzip``, ``tarfile``, ``joblib``...) and
``scripts/pure_domains.py`` (the calls: ``time.sleep`` or any ``.sleep()``, ``torch.save``/``load``,
``from_pretrained``, ``open``, ``Path`` reads and writes, pyarrow's file readers, and the device:
``torch.cuda``, ``torch.distributed``, DDP). Each is shown to catch a planted violation, then to
pass on the code.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = "importlinter:contract:domains-without-io"

PLANTED_CALLS = {  # source: the line and the call reported
    "import time\ntime.sleep(1)\n": "2: time.sleep()",
    "from time import sleep as nap\nnap(1)\n": "2: nap()",
    "import torch\ntorch.save({}, 'x.pt')\n": "2: torch.save()",
    "import torch\nstate = torch.load('x.pt')\n": "2: torch.load()",
    "from transformers import AutoModel\nAutoModel.from_pretrained('m')\n": "2: .from_pretrained()",
    "def keep(model):\n    model.save_pretrained('out')\n": "2: .save_pretrained()",
    "data = open('f').read()\n": "1: open()",
    "from pathlib import Path\nPath('f').write_text('x')\n": "2: .write_text()",
    "from pathlib import Path\nPath('f').read_bytes()\n": "2: .read_bytes()",
    "def make(root):\n    root.mkdir()\n": "2: .mkdir()",
    "def gone(path):\n    path.unlink()\n": "2: .unlink()",
    "def read(path):\n    import pyarrow.parquet as pq\n    return pq.read_table(path)\n": (
        "2: imports pyarrow.parquet"
    ),
    "from pyarrow import parquet\n": "1: imports pyarrow.parquet",
    "import torch\nready = torch.cuda.is_available()\n": "2: torch.cuda.is_available() (device)",
    "import torch\ndef wait(device):\n    torch.cuda.synchronize(device)\n": (
        "3: torch.cuda.synchronize() (device)"
    ),
    "from torch import cuda\ncuda.empty_cache()\n": "2: cuda.empty_cache() (device)",
    "from torch.cuda import set_device as pick\npick(1)\n": "2: pick() (device)",
    "import torch.distributed as dist\ndist.init_process_group('gloo')\n": (
        "2: dist.init_process_group() (device)"
    ),
    "import torch\ntorch.distributed.all_reduce(x)\n": "2: torch.distributed.all_reduce() (device)",
    "from torch.nn.parallel import DistributedDataParallel as DDP\nDDP(model)\n": (
        "2: DDP() (device)"
    ),
    "import time as clock\nclock.sleep(1)\n": "2: clock.sleep()",
    "def idle(sleep):\n    sleep(1)\n": "2: sleep()",
    "def nap(resources):\n    resources.sleep(1)\n": "2: .sleep()",
    "import asyncio\nasync def nap():\n    await asyncio.sleep(1)\n": "3: .sleep()",
}
PURE = (
    "import time\nimport pandas as pd\nstarted = time.perf_counter()\n"
    "frame = pd.DataFrame({'a': [1]}).rename(columns={'a': 'b'})\n"
    "import pyarrow.json as pa_json\n"
    # tensor maths on the device the adapters chose is the domain's
    "import torch\ndef step(batch, device):\n    x = batch.to(device)\n"
    "    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):\n"
    "        return torch.nn.functional.relu(x).sum()\n"
)


def _pure_domains(*folders: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pure_domains.py"), *map(str, folders)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("source", list(PLANTED_CALLS), ids=list(PLANTED_CALLS.values()))
def test_the_call_check_finds_a_planted_io_call(tmp_path: Path, source: str) -> None:
    (tmp_path / "planted.py").write_text(source)
    done = _pure_domains(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"planted.py:{PLANTED_CALLS[source]}\n" in done.stdout
    assert "1 I/O calls in domain code" in done.stdout


def test_the_call_check_passes_clocks_dataframes_parsing_bytes_and_tensor_maths(
    tmp_path: Path,
) -> None:
    (tmp_path / "pure.py").write_text(PURE)
    done = _pure_domains(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_domain_does_io() -> None:
    done = _pure_domains()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 I/O calls in domain code" in done.stdout


def _forbidden_modules() -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config[CONTRACT]["forbidden_modules"].split()


def _lint_planted(tmp_path: Path, domain_source: str) -> subprocess.CompletedProcess[str]:
    """import-linter with the real contract's forbidden modules, on a planted ``planted``
    package whose ``domain`` holds ``domain_source`` and whose ``adapters`` import ``os``."""
    package = tmp_path / "planted"
    for folder in ("", "domain", "adapters"):
        (package / folder).mkdir(exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    (package / "domain" / "rules.py").write_text(domain_source)
    (package / "adapters" / "files.py").write_text("import os\nimport joblib\n")
    forbidden = "\n    ".join(_forbidden_modules())
    config = tmp_path / "importlinter.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    planted\ninclude_external_packages = True\n\n"
        f"[{CONTRACT}]\nname = planted\ntype = forbidden\n"
        f"source_modules =\n    planted.domain\nforbidden_modules =\n    {forbidden}\n"
        "allow_indirect_imports = True\n"
    )
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a test dependency (requirements-dev.txt)"
    return subprocess.run(
        [lint, "--config", str(config), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )


@pytest.mark.parametrize("module", ["os", "gzip", "tarfile", "subprocess", "joblib"])
def test_the_import_contract_refuses_an_io_module_in_a_domain(tmp_path: Path, module: str) -> None:
    done = _lint_planted(tmp_path, f"import {module}\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"planted.domain is not allowed to import {module}" in done.stdout


def test_the_import_contract_lets_adapters_do_the_io(tmp_path: Path) -> None:
    done = _lint_planted(tmp_path, "import json\nimport time\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout
