"""Safe handling of user-supplied dataset locations, shared by the profiler and the trainer-agent.

* :func:`resolve_under_roots`: a local path, resolved (symlinks, ``..``), must lie under one of
  the configured data roots.
* :func:`check_public_url` / :func:`download`: only http(s), only to public addresses (loopback,
  private, link-local, multicast, reserved and unspecified are refused unless a network is
  explicitly allowed), every redirect re-checked, the connection pinned to the address that was
  checked (no DNS rebinding between check and connect), size and time limits, and the partial file
  removed on any failure.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from .errors import DownloadFailed, InputNotAllowed
from .private_files import open_private
from .redaction import redact_url, url_without_credentials

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_REDIRECTS = 5


def resolve_under_roots(ref: str | Path, roots: Sequence[Path]) -> Path:
    """The resolved file path, or :class:`InputNotAllowed` when it lies outside every root."""
    if not roots:
        raise InputNotAllowed("no data roots are configured: local dataset paths are refused")
    path = Path(ref).expanduser().resolve()
    resolved_roots = [Path(root).expanduser().resolve() for root in roots]
    if not any(path.is_relative_to(root) for root in resolved_roots):
        raise InputNotAllowed(f"{ref} is outside the allowed dataset directories")
    return path


def is_public(address: IPAddress) -> bool:
    """True for globally routable unicast addresses."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return is_public(address.ipv4_mapped)
    return not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def parse_networks(values: Sequence[str]) -> list[Network]:
    return [ipaddress.ip_network(value, strict=False) for value in values]


def _allowed(address: IPAddress, allow: Sequence[Network]) -> bool:
    return is_public(address) or any(address in network for network in allow)


async def resolve_checked(host: str, port: int, allow: Sequence[Network] = ()) -> IPAddress:
    """The first address ``host`` resolves to, provided every address it resolves to is allowed."""
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
        addresses: list[IPAddress] = [literal]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except socket.gaierror as exc:
            raise DownloadFailed(f"cannot resolve {host}: {exc}") from exc
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    refused = [str(a) for a in addresses if not _allowed(a, allow)]
    if refused or not addresses:
        raise InputNotAllowed(
            f"{host} resolves to a non-public address ({', '.join(refused)}): refused"
        )
    return addresses[0]


def check_scheme(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputNotAllowed(
            f"only http(s) URLs with a host are accepted, not {url_without_credentials(url)!r}"
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port


async def check_public_url(url: str, allow: Sequence[Network] = ()) -> IPAddress:
    """Raise :class:`InputNotAllowed` unless ``url`` is http(s) to an allowed address."""
    _, host, port = check_scheme(url)
    return await resolve_checked(host, port, allow)


def _pinned(url: str, address: IPAddress) -> tuple[str, str]:
    """The URL with its host replaced by the checked address, and the original Host header value."""
    parts = urlsplit(url)
    host_literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = host_literal + (f":{parts.port}" if parts.port else "")
    host_header = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), host_header


@dataclass(frozen=True)
class DownloadLimits:
    max_bytes: int
    timeout_s: float = 30.0  # per read / connect
    total_timeout_s: float = 600.0
    allow: tuple[Network, ...] = ()


async def download(
    url: str,
    target: Path,
    limits: DownloadLimits,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Path:
    """Stream ``url`` into ``target`` through checked redirects; on any failure nothing is left behind."""
    partial = target.with_name(f"{target.name}.{uuid.uuid4().hex}.part")
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(
            follow_redirects=False, timeout=httpx.Timeout(limits.timeout_s), transport=transport
        ) as client:
            current = url
            for _ in range(MAX_REDIRECTS + 1):
                scheme, host, _port = check_scheme(current)
                address = await check_public_url(current, limits.allow)
                pinned, host_header = _pinned(current, address)
                extensions = {"sni_hostname": host} if scheme == "https" else {}
                request = client.build_request(
                    "GET", pinned, headers={"Host": host_header}, extensions=extensions
                )
                response = await client.send(request, stream=True)
                try:
                    if response.is_redirect:
                        location = response.headers.get("location")
                        if not location:
                            raise DownloadFailed(
                                f"{redact_url(current)} redirected without a Location"
                            )
                        current = urljoin(current, location)
                        continue
                    if response.status_code != 200:
                        raise DownloadFailed(
                            f"GET {redact_url(current)} answered HTTP {response.status_code}"
                        )
                    declared = int(response.headers.get("content-length") or 0)
                    if declared > limits.max_bytes:
                        raise DownloadFailed(
                            f"{redact_url(url)} is {declared:,} bytes, over the limit of {limits.max_bytes:,}"
                        )
                    written = 0
                    with open_private(partial) as handle:
                        async for chunk in response.aiter_raw(1 << 20):
                            written += len(chunk)
                            if written > limits.max_bytes:
                                raise DownloadFailed(
                                    f"{redact_url(url)} is over the limit of {limits.max_bytes:,} bytes"
                                )
                            if time.monotonic() - started > limits.total_timeout_s:
                                raise DownloadFailed(
                                    f"{redact_url(url)} took over {limits.total_timeout_s:.0f} s"
                                )
                            handle.write(chunk)
                    os.replace(partial, target)
                    return target
                finally:
                    await response.aclose()
            raise DownloadFailed(f"{redact_url(url)}: more than {MAX_REDIRECTS} redirects")
    except httpx.HTTPError as exc:
        raise DownloadFailed(f"cannot download {redact_url(url)}: {type(exc).__name__}") from exc
    finally:
        partial.unlink(missing_ok=True)


__all__ = [
    "DownloadLimits",
    "check_public_url",
    "download",
    "is_public",
    "parse_networks",
    "resolve_checked",
    "resolve_under_roots",
]
