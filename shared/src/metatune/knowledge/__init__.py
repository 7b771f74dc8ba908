"""The knowledge base of fine-tuning runs: records, search space, store, import (see records.py)."""

from .records import (
    KB_SCHEMA_VERSION,
    CurvePoint,
    DatasetInfo,
    Hardware,
    KbFileHeader,
    KbRun,
    Provenance,
    RunStatus,
    StudyBest,
)

__all__ = [
    "KB_SCHEMA_VERSION", "CurvePoint", "DatasetInfo", "Hardware", "KbFileHeader", "KbRun", "Provenance",
    "RunStatus", "StudyBest",
]
