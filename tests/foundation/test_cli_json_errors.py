"""`--json` means one JSON object on stdout, errors included. The real CLI process."""

from __future__ import annotations

import json

from tests.support.cli import run
from tests.support.servers import free_port


def test_a_json_command_prints_its_error_as_one_json_object_too(env_for) -> None:
    """With --json, a failure is one `error:` line on stderr and one JSON object on stdout."""
    env = env_for(METATUNE_NATS_URL=f"nats://127.0.0.1:{free_port()}")  # nothing listens there
    for args in (["status", "--json"], ["study", "list", "--json"]):
        result = run(args, env)
        assert result.returncode == 3, result.stderr
        assert json.loads(result.stdout) == {
            "error": result.stderr.strip().removeprefix("error: "),
            "exit_code": 3,
        }
    plain = run(["study", "list"], env)
    assert plain.returncode == 3 and plain.stdout == ""
