"""`metatune report`: the disclosure as one JSON object with `--json` (as with `-f json`), and a
study no id starts with as one `error:` line, exit 1. The real CLI process on the test's schema."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from metatune_telemetry.settings import TelemetrySettings
from tests.support.cli import run

from .scenario import record_dashboard


async def test_report_json_and_a_study_none_matches(db, schema: str, tmp_path: Path) -> None:
    s = await record_dashboard(db)
    url = TelemetrySettings().database_url
    env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")}
    env |= {
        "METATUNE_DATA_DIR": str(tmp_path),
        "METATUNE_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}options="
        + quote(f"-c search_path={schema}"),
    }
    as_json = run(["report", str(s.study)[:8], "--json"], env)
    assert as_json.returncode == 0, as_json.stderr
    disclosure = json.loads(as_json.stdout)
    assert disclosure["study_id"] == str(s.study) and disclosure["runs"]
    assert run(["report", str(s.study), "-f", "json"], env).stdout == as_json.stdout

    none = run(["report", "ffffffff", "--json"], env)
    assert none.returncode == 1, none.stderr
    assert json.loads(none.stdout) == {
        "error": "no single study matches 'ffffffff'",
        "exit_code": 1,
    }
