"""The folder ``metatune adapter download`` writes reads as one downloaded model: every file with
the permissions the user's umask gives a new file, whatever modes the agent's archive recorded."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

from metatune_cli.client.adapters import unpack


def test_every_extracted_file_has_the_mode_of_a_file_the_user_writes(tmp_path: Path) -> None:
    archive = tmp_path / "adapter.tar"
    with tarfile.open(archive, "w") as tar:
        for name, mode in (
            ("adapter_model.safetensors", 0o600),  # as the agent's weights file was
            ("adapter_config.json", 0o644),
            ("metatune.json", 0o644),
        ):
            data = b"{}"
            member = tarfile.TarInfo(name)
            member.size, member.mode = len(data), mode
            tar.addfile(member, io.BytesIO(data))
    written = tmp_path / "written"
    written.write_text("")  # what the user's umask gives a new file

    out = tmp_path / "adapter"
    unpack(archive, out)

    want = stat.S_IMODE(written.stat().st_mode)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes == dict.fromkeys(modes, want)
    assert len(modes) == 3 and os.access(out / "adapter_model.safetensors", os.R_OK)
