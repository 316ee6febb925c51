"""WhipBroadcast: a live session published to a WHIP ingest (RFC 9725) through aiortc.

A WHIP publisher is one more viewer that calls out instead of being called: the
session's shared H.264 (server/stream/viewers.py) and its own Opus, on a peer connection whose
offer is POSTed to the ingest; the answer and a `Location` to DELETE come back. The
ingest is treated as a stranger even though the operator listed it: it is reached only
at the addresses resolved when the broadcast was allowed (server/publish/targets.py), redirects
are not followed, its answer is read up to MAX_ANSWER bytes and never decompressed, a
`Location` elsewhere than the ingest itself is not called, and a public ingest's ICE
candidates may not point inside the network. A refused offer or a connection that fails
is tried again with backoff, each failure a `broadcast_error` event with a reason code.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiortc import RTCPeerConnection, RTCSessionDescription

from server.publish.retry import PublishFailed, keep_publishing, reporter
from server.publish.targets import Target
from server.stream.link import relay_keyframe_requests
from server.stream.playout import Playout
from server.stream.signaling import prefer_h264
from server.stream.tracks import AvatarAudioTrack
from server.stream.viewers import SharedEncoder, SharedVideoTrack

ANSWER_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 15.0  # ICE and DTLS after the answer
MAX_ANSWER = 64 * 1024  # an SDP answer is a few kB


class WhipError(PublishFailed):
    """A failed try, with the reason code (and status) the events carry."""


class PinnedResolver(AbstractResolver):
    """Resolves the target's host to the addresses checked when it was allowed, and nothing else."""

    def __init__(self, target: Target):
        self.target = target

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        if host.rstrip(".").lower() != self.target.host:
            raise OSError(f"{host} is not the ingest")
        return [ResolveResult(hostname=host, host=a, port=port, family=_family(a), proto=0,
                              flags=socket.AI_NUMERICHOST) for a in self.target.addresses]

    async def close(self) -> None:
        pass


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class WhipBroadcast:
    def __init__(self, target: Target, playout: Playout, shared: SharedEncoder, emit: Callable[..., Any]):
        self.target, self.playout, self.shared, self._report = target, playout, shared, reporter(target, emit)
        self._task = asyncio.ensure_future(keep_publishing(target, self._report, self._publish))

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._report("broadcast_stopped")

    async def _publish(self) -> None:
        """Publish until the connection fails (then the caller tries again) or we are stopped."""
        pc = RTCPeerConnection()
        video, audio = SharedVideoTrack(self.playout, self.shared), AvatarAudioTrack(self.playout)
        location = ""
        connector = aiohttp.TCPConnector(resolver=PinnedResolver(self.target), use_dns_cache=False)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as http:
            try:
                sender = pc.addTransceiver(video, direction="sendonly")
                relay_keyframe_requests(sender.sender, self.shared.want_keyframe)
                prefer_h264(sender)
                pc.addTransceiver(audio, direction="sendonly")
                await pc.setLocalDescription(await pc.createOffer())
                location, answer = await self._offer(http, pc.localDescription.sdp)
                try:
                    await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
                except ValueError:
                    raise WhipError("bad_answer") from None
                self.shared.want_keyframe()
                await _connected(pc)
                self._report("broadcast_started")
                await _ended(pc)
                raise WhipError("dropped", started=True)
            finally:
                video.stop()
                audio.stop()
                await pc.close()
                if location:
                    await _delete(http, location)

    async def _offer(self, http: aiohttp.ClientSession, sdp: str) -> tuple[str, str]:
        """(the resource to DELETE, or "" if the ingest named none of its own; the SDP answer)."""
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                async with http.post(self.target.url, data=sdp, allow_redirects=False,
                                     headers={"Content-Type": "application/sdp"}) as res:
                    if res.status != 201:
                        raise WhipError("refused", res.status)
                    body = await _bounded(res)
                    named = res.headers.get("Location", "")
                    where = urljoin(self.target.url, named) if named else ""
        except TimeoutError:
            raise WhipError("timeout") from None
        except aiohttp.ClientConnectorError as exc:
            raise WhipError(_connect_reason(exc)) from None
        except (aiohttp.ClientError, OSError):
            raise WhipError("dropped") from None
        answer = _answer(body, self.target)
        return (where if where and _same_origin(where, self.target.url) else ""), answer


async def _bounded(res: aiohttp.ClientResponse) -> bytes:
    """The body, refused past MAX_ANSWER bytes (as sent: it is not decompressed)."""
    if res.content_length is not None and res.content_length > MAX_ANSWER:
        raise WhipError("too_large")
    body = bytearray()
    async for chunk in res.content.iter_chunked(16 * 1024):
        body += chunk
        if len(body) > MAX_ANSWER:
            raise WhipError("too_large")
    return bytes(body)


def _answer(body: bytes, target: Target) -> str:
    """An SDP answer: plain text beginning `v=0`; candidates inside the network only from an
    ingest that is inside too."""
    try:
        sdp = body.decode("ascii")
    except UnicodeDecodeError:
        raise WhipError("bad_answer") from None
    if not sdp.startswith("v=0") or "\na=fingerprint:" not in sdp and "\r\na=fingerprint:" not in sdp:
        raise WhipError("bad_answer")
    lines = [line for line in sdp.splitlines() if target.internal or _public_candidate(line)]
    return "\r\n".join(lines) + "\r\n"


def _public_candidate(line: str) -> bool:
    if not line.startswith("a=candidate:"):
        return True
    fields = line.split()
    try:
        address = ipaddress.ip_address(fields[4])
    except (IndexError, ValueError):
        return False  # an mDNS name or garbage: not resolved on the ingest's behalf
    return address.is_global and not address.is_multicast


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port) and "@" not in pa.netloc


def _connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    if isinstance(exc.os_error, ConnectionRefusedError):
        return "connection_refused"  # nothing listens there; "refused" is an answer, with its status
    if isinstance(exc.os_error, TimeoutError):
        return "timeout"
    return "unreachable"


async def _connected(pc: RTCPeerConnection) -> None:
    """Wait for ICE and DTLS to complete: only then did the ingest accept the stream."""
    done = asyncio.Event()
    pc.on("connectionstatechange", done.set)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            while pc.connectionState != "connected":
                if pc.connectionState in ("failed", "closed"):
                    raise WhipError("unreachable")
                done.clear()
                await done.wait()
    except TimeoutError:
        raise WhipError("timeout") from None


async def _ended(pc: RTCPeerConnection) -> None:
    ended = asyncio.Event()
    pc.on("connectionstatechange", lambda: ended.set() if pc.connectionState in ("failed", "closed") else None)
    if pc.connectionState not in ("failed", "closed"):
        await ended.wait()


async def _delete(http: aiohttp.ClientSession, location: str) -> None:
    try:
        async with asyncio.timeout(5):
            async with http.delete(location, allow_redirects=False):
                pass
    except (aiohttp.ClientError, TimeoutError, OSError):
        pass  # the ingest is gone already: nothing to end there
