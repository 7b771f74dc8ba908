"""Safe inputs: data roots for local paths, public addresses for URLs, checked redirects, limits."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from metatune.errors import DownloadFailed, InputNotAllowed
from metatune.inputs import (
    DownloadLimits,
    check_public_url,
    download,
    parse_networks,
    resolve_under_roots,
)

LOOPBACK_ONE = tuple(parse_networks(["127.0.0.1/32"]))


def test_a_path_must_resolve_under_a_root(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    inside = root / "sub" / "ok.jsonl"
    inside.write_text("{}\n")
    assert resolve_under_roots(str(inside), [root]) == inside.resolve()
    with pytest.raises(InputNotAllowed):
        resolve_under_roots(str(root / ".." / ".." / "etc" / "passwd"), [root])
    with pytest.raises(InputNotAllowed):
        resolve_under_roots("/etc/passwd", [root])
    escape = root / "sub" / "escape.jsonl"
    escape.symlink_to("/etc/passwd")
    with pytest.raises(InputNotAllowed):
        resolve_under_roots(str(escape), [root])  # a symlink is followed before the check
    with pytest.raises(InputNotAllowed):
        resolve_under_roots(str(inside), [])


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://localhost/x",
        "http://[::1]/x",
        "http://10.1.2.3/x",
        "http://192.168.0.7/x",
        "http://172.16.5.4/x",
        "http://169.254.169.254/latest/meta-data",
        "http://224.0.0.1/x",
        "http://0.0.0.0/x",
        "http://[::ffff:127.0.0.1]/x",
        "file:///etc/passwd",
        "ftp://example.org/x",
    ],
)
async def test_non_public_addresses_and_other_schemes_are_refused_without_connecting(
    url: str,
) -> None:
    with pytest.raises(InputNotAllowed):
        await check_public_url(url)


async def test_a_public_address_literal_passes_the_check() -> None:
    assert (
        str(await check_public_url("https://1.1.1.1/data.jsonl")) == "1.1.1.1"
    )  # checked, not fetched


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, dict[str, str], bytes]]] = {}

    def do_GET(self) -> None:
        status, headers, body = self.routes.get(self.path, (404, {}, b""))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, tuple[int, dict[str, str], bytes]]]]:
    routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
    handler = type("Handler", (_Handler,), {"routes": routes})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", routes
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_download_follows_allowed_redirects_and_refuses_a_redirect_to_a_forbidden_address(
    server, tmp_path: Path
) -> None:
    base, routes = server
    port = base.rsplit(":", 1)[1]
    routes["/data"] = (200, {}, b'{"text": "a", "label": "x"}\n')
    routes["/hop"] = (302, {"Location": "/data"}, b"")
    routes["/to-other-loopback"] = (302, {"Location": f"http://127.0.0.2:{port}/data"}, b"")
    routes["/to-metadata"] = (307, {"Location": "http://169.254.169.254/latest/meta-data"}, b"")
    limits = DownloadLimits(max_bytes=1000, allow=LOOPBACK_ONE)
    target = tmp_path / "out.jsonl"
    await download(f"{base}/hop", target, limits)
    assert target.read_bytes() == routes["/data"][2]
    for path in ("/to-other-loopback", "/to-metadata"):
        with pytest.raises(InputNotAllowed):
            await download(f"{base}{path}", tmp_path / "refused.jsonl", limits)
    with pytest.raises(InputNotAllowed):  # loopback itself is refused unless allowed
        await download(f"{base}/data", tmp_path / "refused.jsonl", DownloadLimits(max_bytes=1000))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "out.jsonl"
    ]  # nothing partial left behind


async def test_download_limits_leave_no_partial_file(server, tmp_path: Path) -> None:
    base, routes = server
    routes["/big"] = (200, {}, b"x" * 5000)
    routes["/gone"] = (500, {}, b"")
    routes["/loop"] = (302, {"Location": "/loop"}, b"")
    limits = DownloadLimits(max_bytes=1000, allow=LOOPBACK_ONE)
    for path in ("/big", "/gone", "/loop"):
        with pytest.raises(DownloadFailed):
            await download(f"{base}{path}", tmp_path / "x.jsonl", limits)
    assert list(tmp_path.iterdir()) == []
