"""`metatune secrets --group GID` for compose: compose mounts each secret file with its host owner,
group and mode, and the containers run as other users, so the files become 0640 and the group's,
in folders only their owner may open (0700); every container that mounts one runs in that group
(tests/test_compose_spec.py checks the compose side)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.cli import run

IMAGE_UID = 10001  # the user the Dockerfile's images run as
CAT = shutil.which("cat") or "/bin/cat"


def a_group_to_give() -> int:
    """A group this process may give files to, other than its own where it can (root: any)."""
    if os.geteuid() == 0:
        return IMAGE_UID
    return next((g for g in os.getgroups() if g != os.getegid()), os.getegid())


def make(env: dict[str, str], secrets_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run(
        ["secrets", *extra, "--db-password-file", str(secrets_dir / "db.password"), "--json"], env
    )


def test_the_files_are_the_groups_and_private_on_the_host(env_for, tmp_path: Path) -> None:
    secrets_dir = tmp_path / "compose" / "secrets"
    env = env_for(METATUNE_NATS_SECRETS_DIR=str(secrets_dir / "nats"))
    gid = a_group_to_give()
    made = make(env, secrets_dir, "--group", str(gid))
    assert made.returncode == 0, made.stderr
    files = [*(secrets_dir / "nats").iterdir(), secrets_dir / "db.password"]
    assert {"dashboard.token", "auth.conf", "profiler.nk"} <= {p.name for p in files}
    report = json.loads(made.stdout)
    assert report["group"] == gid and report["group_readable"] == len(files)
    for path in files:
        info = path.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_gid, info.st_uid) == (0o640, gid, os.geteuid())
    for folder in (secrets_dir, secrets_dir / "nats"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700

    again = make(env, secrets_dir, "--rotate")  # rotated without --group: owner-only again
    assert again.returncode == 0, again.stderr
    for name in ("dashboard.token", "profiler.nk", "auth.conf"):
        assert stat.S_IMODE((secrets_dir / "nats" / name).stat().st_mode) == 0o600


def test_a_folder_other_users_may_open_is_refused_and_left_alone(env_for, tmp_path: Path) -> None:
    env = env_for(METATUNE_NATS_SECRETS_DIR=str(tmp_path / "nats"))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    refused = run(
        ["secrets", "--group", str(a_group_to_give()), "--db-password-file", str(shared / "p")],
        env,
    )
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: --group: ") and "open to other users" in line
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert stat.S_IMODE((shared / "p").stat().st_mode) == 0o600


def read_as(uid: int, groups: list[int], path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CAT, str(path)],
        user=uid,
        group=uid,
        extra_groups=groups,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to the images' uid needs root")
def test_only_a_user_in_the_group_reads_a_mounted_file(env_for) -> None:
    """What a container sees: a bind mount is the file itself, without the folders above it; a
    hard link in an open folder stands for it. The images' user reads it when it is in the group
    (compose's group_add), not without; through the 0700 folder on the host no one reaches it."""
    gid = 20017  # not the images' own group: only group_add puts their user in it
    with tempfile.TemporaryDirectory() as name:  # open to all, as /tmp is: only ours closes
        root = Path(name)
        root.chmod(0o755)
        secrets_dir = root / "secrets"
        env = env_for(METATUNE_NATS_SECRETS_DIR=str(secrets_dir / "nats"))
        assert make(env, secrets_dir, "--group", str(gid)).returncode == 0
        seed = secrets_dir / "nats" / "profiler.nk"
        mounted = root / "nats_profiler"
        os.link(seed, mounted)
        assert read_as(IMAGE_UID, [gid], mounted).stdout == seed.read_text()
        refused = read_as(IMAGE_UID, [], mounted)  # a container not in the group
        assert refused.returncode != 0 and "Permission denied" in refused.stderr
        host = read_as(IMAGE_UID, [gid], seed)  # on the host, even in the group
        assert host.returncode != 0 and "Permission denied" in host.stderr
