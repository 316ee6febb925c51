"""Broadcast targets: which ingests a client may name, and where they are reached.

Where a session is published is the operator's choice, not the client's: the server
config lists ingest hosts (`broadcast_targets`, `host` or `host:port`), and nothing else
is ever connected to. A client's URL is parsed strictly (lower-case scheme, printable
ASCII only, no credentials, no FFmpeg-style options, a bounded length), must name a
listed host, and is resolved here, once: every address it resolves to must be public,
unless the operator listed that very address (an IP literal), or `localhost` for
loopback, so a listed name that points inside the network is refused too. The WHIP
publisher connects to exactly the addresses resolved here.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from server.errors import ApiError

MAX_URL = 2048
DEFAULT_PORTS = {"rtmp": 1935, "rtmps": 443, "https": 443, "http": 80}  # http(s): a WHIP endpoint
RESOLVE_TIMEOUT_S = 5.0
_URL = re.compile(r"(rtmps?|https?)://[!-~]+")  # printable ASCII, no spaces: nothing FFmpeg reads as options
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?")
_PATH = re.compile(r"[A-Za-z0-9._~!$'()*+,;=:@%/-]*")
_QUERY = re.compile(r"[A-Za-z0-9._~=&%-]*")  # some ingests (Facebook's) carry the key's options here
_PROTOCOL_OPTIONS = {"listen", "listen_timeout", "timeout", "rw_timeout", "tcurl", "rtmp_app", "rtmp_tcurl"}
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(ApiError):
    """A target the operator has not allowed (403)."""

    def __init__(self, message: str):
        super().__init__(403, "target_not_allowed", message)


@dataclass(frozen=True)
class Target:
    """A checked ingest: the URL as given, and the addresses it was resolved to."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]
    internal: bool  # the operator allowed a non-public address (its media may be internal too)

    @property
    def public(self) -> str:
        """The URL without its stream key (an RTMP URL's last path part), query or credentials:
        fit for events and logs."""
        path = urlsplit(self.url).path
        if self.scheme.startswith("rtmp"):
            path = path.rsplit("/", 1)[0]
        return f"{self.scheme}://{_netloc(self.host, self.port)}{path}"


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class Listed:
    host: str
    port: int | None

    @classmethod
    def parse(cls, entry: str) -> Listed:
        parts = urlsplit(f"//{entry.strip().lower()}")
        try:
            host, port = parts.hostname or "", parts.port
        except ValueError:
            host, port = "", None
        if not host or parts.path or parts.query or "@" in parts.netloc:
            raise ValueError(f"broadcast target {entry!r} is not a host or host:port")
        return cls(host, port)

    def allows(self, address: Address) -> bool:
        """A non-public address is allowed only where this entry names it (or is `localhost`, for loopback)."""
        if self.host == "localhost":
            return address.is_loopback
        try:
            return ipaddress.ip_address(self.host) == address
        except ValueError:
            return False


def parse_url(url: object) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL we understand, or the API's 400 saying what is accepted."""
    if not isinstance(url, str) or len(url) > MAX_URL or not _URL.fullmatch(url):
        raise _bad_url()
    parts = urlsplit(url)
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError:
        raise _bad_url() from None
    host = parts.hostname or ""
    if "@" in parts.netloc or parts.fragment or not (_HOST.fullmatch(host) or _ip(host)):
        raise _bad_url()
    if not _PATH.fullmatch(parts.path) or not _QUERY.fullmatch(parts.query):
        raise _bad_url()
    if {kv.split("=", 1)[0].lower() for kv in parts.query.split("&")} & _PROTOCOL_OPTIONS:
        raise _bad_url()
    if parts.scheme.startswith("rtmp") and parts.path.count("/") < 2:
        raise _bad_url()  # rtmp://host/app/stream-key: an app and a key
    return parts.scheme, host.rstrip("."), port


def _bad_url() -> ApiError:
    return ApiError(400, "bad_url", "'url' must be an RTMP(S) ingest (rtmp://host/app/stream-key) or a WHIP "
                    "endpoint (https://host/whip): lower-case scheme, no spaces, credentials or options")


def _ip(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class TargetPolicy:
    """The operator's allow-list (`broadcast_targets`) applied to clients' URLs."""

    def __init__(self, entries: tuple[str, ...]):
        self.listed = [Listed.parse(e) for e in entries]

    @property
    def enabled(self) -> bool:
        return bool(self.listed)

    async def check(self, url: object) -> Target:
        """The target, resolved and allowed; else 403 broadcast_disabled, 400 bad_url or
        403 target_not_allowed. Nothing is connected to here but the resolver."""
        if not self.enabled:
            raise ApiError(403, "broadcast_disabled", "broadcasting is off on this server: the operator has "
                           "listed no ingest hosts (AVATAR_BROADCAST_TARGETS)")
        scheme, host, port = parse_url(url)
        entries = [e for e in self.listed if e.host == host and e.port in (None, port)]
        if not entries:
            raise TargetRefused(f"{_netloc(host, port)} is not an ingest this server may publish to")
        addresses = await _resolve(host, port)
        internal = [a for a in addresses if not _public(a)]
        if any(not any(e.allows(a) for e in self.listed) for a in internal):
            raise TargetRefused(f"{host} resolves to an address that is not public; the operator may list "
                                "that address itself to allow it")
        return Target(str(url), scheme, host, port, tuple(str(a) for a in addresses), bool(internal))


def _public(address: Address) -> bool:
    return address.is_global and not address.is_multicast


async def _resolve(host: str, port: int) -> list[Address]:
    if (literal := _ip(host)) is not None:
        return [literal]
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S)
    except (OSError, TimeoutError):
        raise ApiError(422, "unresolved", f"the ingest host {host} could not be resolved") from None
    found = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}
    if not found:
        raise ApiError(422, "unresolved", f"the ingest host {host} could not be resolved")
    return sorted(found, key=lambda a: (a.version, int(a)))
