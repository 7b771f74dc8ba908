"""Fitted priors on disk, one file per :func:`~..domain.fitted.prior_key` and code version.

A file is the pickled :class:`~..domain.prior.LearnedPrior`; its name also digests this package's
domain source and the versions of torch and gpytorch, so a prior fitted by other code is never
read back. Pickle runs code when loaded, so the folder is the service's own (created 0700, files
0600, written to a temporary name and renamed into place: a reader never sees half a file). A
file that does not load (truncated, another Python) is removed and the prior fitted again.

Beside each prior, its :class:`~..domain.scoring.PriorScorer` (``scorer-*.pickle``, under
:func:`~..domain.fitted.scorer_key`): NumPy arrays and the candidates, loaded without importing
torch. Its name digests, besides the domain source and those versions, the shared code the
candidates come from (the LoRA space's ``decode`` and the contracts) and scipy's version (the
Sobol design), since its key does not hold the candidates themselves.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metatune.settings import Settings

from ..domain.scoring import PriorScorer

if TYPE_CHECKING:
    from ..domain.prior import LearnedPrior

log = logging.getLogger(__name__)
DOMAIN = Path(__file__).resolve().parent.parent / "domain"


@cache
def code_version() -> str:
    """The domain's source and the numerical libraries' versions, digested."""
    digest = hashlib.sha256()
    for path in sorted(DOMAIN.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    for package in ("torch", "gpytorch", "numpy"):
        digest.update(f"{package}=={version(package)}".encode())
    return digest.hexdigest()[:16]


@cache
def scorer_code_version() -> str:
    """:func:`code_version`, the shared modules the candidates are decoded and validated by, and
    the versions of scipy (the Sobol design) and pydantic."""
    import metatune.contracts
    import metatune.knowledge.space

    digest = hashlib.sha256(code_version().encode())
    for module in (metatune.knowledge.space, metatune.contracts):
        source = Path(str(module.__file__))
        paths = sorted(source.parent.glob("*.py")) if source.name == "__init__.py" else [source]
        for path in paths:
            digest.update(path.name.encode() + path.read_bytes())
    for package in ("scipy", "pydantic"):
        digest.update(f"{package}=={version(package)}".encode())
    return digest.hexdigest()[:16]


class PriorCache:
    """A :class:`~..domain.fitted.PriorStore` in a folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        return self.root / f"prior-{code_version()}-{key[:32]}.pickle"

    def scorer_path(self, key: str) -> Path:
        return self.root / f"scorer-{scorer_code_version()}-{key[:32]}.pickle"

    def load(self, key: str) -> LearnedPrior | None:
        from ..domain.prior import LearnedPrior  # torch and gpytorch: only where a prior is read

        prior = self._read(self.path(key))
        return prior if isinstance(prior, LearnedPrior) else None

    def save(self, key: str, prior: LearnedPrior) -> None:
        self._write(self.path(key), prior)

    def load_scorer(self, key: str) -> PriorScorer | None:
        scorer = self._read(self.scorer_path(key))
        return scorer if isinstance(scorer, PriorScorer) else None

    def save_scorer(self, key: str, scorer: PriorScorer) -> None:
        self._write(self.scorer_path(key), scorer)

    @staticmethod
    def _read(path: Path) -> Any:
        try:
            with path.open("rb") as file:
                return pickle.load(file)  # our own file, in our own 0700 folder
        except FileNotFoundError:
            return None
        except Exception as exc:  # a torn or foreign file: fit again, never fail a recommendation
            log.warning("fitted prior %s unreadable (%s): fitting again", path.name, exc)
            path.unlink(missing_ok=True)
            return None

    def _write(self, path: Path, value: object) -> None:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root, suffix=".tmp", delete=False) as file:
                pickle.dump(value, file, protocol=pickle.HIGHEST_PROTOCOL)
                file.flush()
                os.fsync(file.fileno())
            os.replace(file.name, path)
        except OSError as exc:  # a full or read-only disk costs the next process a fit, no more
            log.warning("fitted prior not kept in %s: %s", self.root, exc)


def prior_cache(settings: Settings) -> PriorCache:
    """The fitted-prior folder under the data directory (``METATUNE_DATA_DIR``)."""
    return PriorCache(settings.resolved_data_dir() / "recommender" / "priors")
