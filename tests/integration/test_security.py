"""Reliability and security, round 3: the server attacked through broadcast, added viewers,
uploads and the browser, as the issue's probes did. Every probe gets a clear 4xx or a reason
code, nothing reaches a host the operator did not list, the server keeps serving, and its
descriptors, threads, helper processes, memory and disk come back to where they were."""

from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import time
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from aiortc import RTCPeerConnection

from avatar_client import AvatarViewer
from engine.families.portrait.avatar import ASSETS
from testkit.hostile import SECRET, HostileNetwork
from testkit.server import ServerProcess
from tests.unit.test_clip_safety import wide_clip

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def net():
    return HostileNetwork()


@pytest.fixture(scope="module")
def guarded(net, tmp_path_factory):
    """A server whose operator listed the WHIP ingest's and the silent ingest's ports only;
    `baseline`: its resources once it has served a session (its lazy parts started)."""
    targets = f"127.0.0.1:{net.whip_port},127.0.0.1:{net.silent_port}"
    env = {"AVATAR_BROADCAST_TARGETS": targets, "AVATAR_MAX_VIEWERS": "2", "AVATAR_MAX_SESSIONS": "6",
           "AVATAR_AVATARS_DIR": str(tmp_path_factory.mktemp("avatars"))}

    async def warm(url: str) -> None:  # as many sessions at once as the probes open
        viewers = [await playing(url), await playing(url)]
        await asyncio.sleep(5)
        for viewer in viewers:
            await viewer.close()

    with ServerProcess(env) as proc:
        asyncio.run(warm(proc.url))
        time.sleep(2)
        proc.baseline = resources(proc)
        yield proc


def resources(proc: ServerProcess) -> dict[str, float]:
    pid = proc.proc.pid
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f)
    children = sum(1 for p in os.listdir("/proc") if p.isdigit() and _parent(p) == pid)
    folder = Path(proc_env(proc)["AVATAR_AVATARS_DIR"])
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": int(status["Threads"]),
            "children": children, "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
            "files": len(list(folder.glob("*"))) if folder.exists() else 0}


def proc_env(proc: ServerProcess) -> dict[str, str]:
    raw = Path(f"/proc/{proc.proc.pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def _parent(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


async def playing(url: str) -> AvatarViewer:
    viewer = AvatarViewer(url)
    await viewer.connect()
    viewer.recorded = await viewer.record_events()
    await viewer.wait_frames(25)
    return viewer


async def post_broadcast(url: str, session_id: str, target: object, **headers: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/v1/sessions/{session_id}/broadcast", json={"url": target},
                             headers=headers) as res:
            return res.status, await res.json(content_type=None)


async def stop_broadcast(url: str, session_id: str) -> int:
    async with aiohttp.ClientSession() as http:
        async with http.delete(f"{url}/v1/sessions/{session_id}/broadcast") as res:
            return res.status


# --- broadcast: the operator's targets only ----------------------------------------------
async def test_broadcast_is_off_until_the_operator_lists_targets(server, net):
    viewer = await playing(server.url)
    try:
        for target in (f"http://127.0.0.1:{net.secret_port}/secret", f"rtmp://127.0.0.1:{net.silent_port}/a/b"):
            status, body = await post_broadcast(server.url, viewer.session_id, target)
            assert (status, body["error"]["code"]) == (403, "broadcast_disabled"), body
        await asyncio.sleep(0.5)
        assert net.secret_hits == 0 and net.silent_connections == 0, "the server connected somewhere"
    finally:
        await viewer.close()


BAD_URLS = [
    ("RTMP://127.0.0.1:{silent}/live/key", 400), (" rtmp://127.0.0.1:{silent}/live/key", 400),
    ("rtmp://127.0.0.1:{silent}/live/key rtmp_app=x tcurl=y", 400), ("rtmp://127.0.0.1:{silent}/live/k?listen=1", 400),
    ("rtmp://127.0.0.1:{silent}/live/k\x00", 400), ("rtmp://127.0.0.1:{silent}/live/" + "k" * 200_000, 400),
    ("http://admin:pw@127.0.0.1:{whip}/x", 400), ("gopher://127.0.0.1:{whip}/x", 400),
    ("file:///etc/passwd", 400), ("http://127.0.0.1:{secret}/secret", 403),
    ("http://127.0.0.1:{secret}/secret?token=abc", 403), ("rtmp://10.0.0.1/live/key", 403),
    ("http://localhost:{whip}/status", 403), ("http://127.0.0.2:{whip}/status", 403),
]


async def test_urls_it_does_not_understand_or_allow_are_refused_before_any_connection(guarded, net):
    viewer = await playing(guarded.url)
    try:
        for pattern, expected in BAD_URLS:
            url = pattern.format(silent=net.silent_port, whip=net.whip_port, secret=net.secret_port)
            status, body = await post_broadcast(guarded.url, viewer.session_id, url)
            assert status == expected, (url[:80], status, body)
            assert body["error"]["code"] == ("bad_url" if expected == 400 else "target_not_allowed"), body
        assert net.secret_hits == 0 and not net.hits, net.hits
    finally:
        await viewer.close()


HOSTILE_ANSWERS = [("/status", "refused", 200), ("/redirect", "refused", 307), ("/notsdp", "bad_answer", None),
                   ("/gzip", "bad_answer", None), ("/huge", "too_large", None), ("/slow", "timeout", None)]


async def test_a_listed_whip_ingest_that_turns_hostile_gets_reason_codes_and_nothing_more(guarded, net):
    viewer = await playing(guarded.url)
    rss_before = resources(guarded)["rss_mb"]
    try:
        for path, reason, status in HOSTILE_ANSWERS:
            url = f"http://127.0.0.1:{net.whip_port}{path}"
            posted = time.time()
            assert (await post_broadcast(guarded.url, viewer.session_id, url))[0] == 202
            error = await viewer.wait_event("broadcast_error", 20, after=posted)
            assert error["reason"] == reason and error.get("status") == status, (path, error)
            assert SECRET not in json.dumps(error) and "hello" not in json.dumps(error), error
            assert await stop_broadcast(guarded.url, viewer.session_id) == 204
        started = [e for e in viewer.recorded if e["type"] == "broadcast_started"]
        assert not started, "broadcast_started before any ingest accepted the stream"
    finally:
        await viewer.close()
    assert net.secret_hits == 0, f"a redirect or a Location reached the internal service: {net.hits}"
    assert resources(guarded)["rss_mb"] - rss_before < 50, "a hostile answer was read into memory"


async def test_an_ingest_that_never_answers_costs_other_sessions_nothing(guarded, net):
    """The probe that froze the server for 20 s: now the publisher process times out alone.
    The other session's frames are compared with the same span before the broadcast."""
    caster, other = await playing(guarded.url), await playing(guarded.url)
    try:
        quiet_from = time.time()
        await asyncio.sleep(8)
        posted = time.time()
        url = f"rtmp://127.0.0.1:{net.silent_port}/live/secret-key"
        assert (await post_broadcast(guarded.url, caster.session_id, url))[0] == 202
        health = asyncio.ensure_future(health_times(guarded.url, until=lambda: any(
            e["type"] == "broadcast_error" and e["t"] > posted for e in caster.recorded)))
        error = await caster.wait_event("broadcast_error", 30, after=posted)
        times = await health
        assert error["reason"] == "timeout" and "secret-key" not in json.dumps(error), error
        assert net.silent_connections >= 1
        quiet, probed = frames_of(other, quiet_from, posted), frames_of(other, posted, error["t"])
        print(f"other session: quiet {quiet}, while the ingest was silent {probed}")
        # a frozen server sends nothing (fps near 0 in its stats); a busy 2-core one holds
        # more pictures while the publisher process starts, and still sends 25 a second, or
        # as many as it sent before the probe on this machine in this run (its baseline)
        floor = min(24.0, quiet["min_fps"]) - 1
        assert probed["min_fps"] >= floor and probed["held_share"] <= quiet["held_share"] + 0.2, (quiet, probed)
        p95 = float(np.percentile(times, 95))
        print(f"/healthz: {len(times)} requests, p95 {p95 * 1000:.1f} ms, max {max(times) * 1000:.1f} ms")
        assert p95 < 0.1 and max(times) < 1.0, f"/healthz p95 {p95 * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
        assert await stop_broadcast(guarded.url, caster.session_id) == 204
        guarded.log.flush()
        assert "secret-key" not in Path(guarded.log.name).read_text(), "the stream key reached the log"
    finally:
        await caster.close()
        await other.close()


def frames_of(viewer: AvatarViewer, start: float, end: float) -> dict[str, float]:
    """The server's stats of a session between two times: fps sent, and the share of ticks
    whose picture was held because the engine was late."""
    stats = [e for e in viewer.recorded if e["type"] == "stats" and start + 1 < e["t"] <= end]
    assert len(stats) >= 5, stats
    ticks = 25 * (stats[-1]["t"] - stats[0]["t"])
    return {"fps": round(statistics.mean(e["fps"] for e in stats), 2), "min_fps": min(e["fps"] for e in stats),
            "held_share": round((stats[-1]["held"] - stats[0]["held"]) / ticks, 3)}


async def health_times(url: str, until) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    async with aiohttp.ClientSession() as http:
        while not until():
            started = time.monotonic()
            async with http.get(url + "/healthz") as res:
                await res.read()
            times.append(time.monotonic() - started)
            await asyncio.sleep(0.05)
    return times


async def test_broadcasts_are_limited_per_client(guarded, net):
    a, b = await playing(guarded.url), await playing(guarded.url)
    try:
        url = f"rtmp://127.0.0.1:{net.silent_port}/live/key"
        assert (await post_broadcast(guarded.url, a.session_id, url))[0] == 202
        status, body = await post_broadcast(guarded.url, b.session_id, url)
        assert (status, body["error"]["code"]) == (429, "too_many_broadcasts"), body
    finally:
        await a.close()
        await b.close()


# --- races with the session's end ----------------------------------------------------------
async def slow_post_then_delete(url: str, session_id: str, path: str, body: bytes, kind: str) -> int:
    """POST whose body arrives only after the session was deleted; the POST's status."""
    port = int(url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write((f"POST /v1/sessions/{session_id}/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {kind}\r\n"
                  f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body[:10])
    await writer.drain()
    await asyncio.sleep(0.3)
    async with aiohttp.ClientSession() as http:
        async with http.delete(f"{url}/v1/sessions/{session_id}") as res:
            assert res.status == 204
    writer.write(body[10:])
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    writer.close()
    return int(head.split()[1])


async def test_a_broadcast_or_viewer_whose_request_outlives_its_session_is_refused(guarded, net):
    before = dict(net.hits)
    viewer = await playing(guarded.url)
    body = json.dumps({"url": f"http://127.0.0.1:{net.whip_port}/status"}).encode()
    assert await slow_post_then_delete(guarded.url, viewer.session_id, "broadcast", body, "application/json") == 404
    await viewer.close(delete=False)
    viewer = await playing(guarded.url)
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    offer = pc.localDescription.sdp.encode()
    assert await slow_post_then_delete(guarded.url, viewer.session_id, "viewers", offer, "application/sdp") == 404
    await pc.close()
    await viewer.close(delete=False)
    await asyncio.sleep(3)
    assert dict(net.hits) == before, "a broadcast of a deleted session reached its ingest"


async def test_viewers_that_never_connect_free_their_places_as_fast_as_a_session(guarded):
    viewer = await playing(guarded.url)
    pcs = []

    async def add() -> int:
        pc = RTCPeerConnection()
        pcs.append(pc)
        pc.addTransceiver("video", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{guarded.url}/v1/sessions/{viewer.session_id}/viewers",
                                 data=pc.localDescription.sdp, headers={"Content-Type": "application/sdp"}) as res:
                return res.status

    try:
        assert [await add(), await add()] == [201, 201]  # offers that are never completed
        taken = time.monotonic()
        assert await add() == 429
        while await add() != 201:
            assert time.monotonic() - taken < 25, "places of viewers that never connected are still held"
            await asyncio.sleep(1)
        assert time.monotonic() - taken >= 5, "a viewer's place went before it had time to connect"
    finally:
        for pc in pcs:
            await pc.close()
        await viewer.close()


# --- the browser: only our own pages drive the API ------------------------------------------
async def test_other_sites_pages_and_rebinding_hosts_cannot_drive_the_api(guarded):
    evil = {"Origin": "http://evil.example"}
    async with aiohttp.ClientSession() as http:
        async with http.post(guarded.url + "/v1/sessions", data='{"sdp": "x", "type": "offer"}',
                             headers={**evil, "Content-Type": "text/plain"}) as res:
            assert (res.status, (await res.json())["error"]["code"]) == (403, "origin_not_allowed")
        # its preflight is answered so its page can read the refusal; the request itself is refused
        # before any handler, and the list of avatars does not grow
        async with http.options(guarded.url + "/v1/avatars", headers={
                **evil, "Access-Control-Request-Method": "POST"}) as res:
            assert res.status == 204 and res.headers["Access-Control-Allow-Origin"] == evil["Origin"]
        async with http.get(guarded.url + "/v1/avatars") as res:
            before = await res.json()
        form = aiohttp.FormData()
        form.add_field("image", b"\x89PNG", filename="a.png", content_type="image/png")
        async with http.post(guarded.url + "/v1/avatars", data=form, headers=evil) as res:
            assert res.status == 403 and (await res.json())["error"]["code"] == "origin_not_allowed"
            assert res.headers["Access-Control-Allow-Origin"] == evil["Origin"]
        async with http.get(guarded.url + "/v1/avatars") as res:
            assert await res.json() == before
        async with http.post(guarded.url + "/v1/sessions/x/interrupt", headers={"Sec-Fetch-Site": "cross-site"}) as res:
            assert res.status == 403
        async with http.post(guarded.url + "/v1/sessions/x/interrupt", headers={"Origin": guarded.url}) as res:
            assert res.status == 404  # our own page: through to the API
        for host in ("evil.example.com", "rebind.attacker.net:8080"):
            async with http.get(guarded.url + "/v1/avatars", headers={"Host": host}) as res:
                assert (res.status, (await res.json())["error"]["code"]) == (421, "host_not_allowed")
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await http.ws_connect(guarded.url + "/v1/sessions/x/events", headers={"Host": host})
            assert err.value.status == 421
        for host in ("x", "localhost", "127.0.0.1", "[::1]"):
            async with http.get(guarded.url + "/v1/avatars", headers={"Host": host}) as res:
                assert res.status == 200, host


# --- uploads are opened as what they claim to be ----------------------------------------------
async def upload_video(url: str, data: bytes, name: str) -> tuple[int, dict, float]:
    form = aiohttp.FormData()
    form.add_field("video", data, filename=name, content_type="video/mp4")
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/avatars", data=form) as res:
            return res.status, await res.json(), time.monotonic() - started


async def test_uploads_that_are_not_clips_or_are_too_large_are_refused_from_their_header(guarded, tmp_path):
    playlist = b"ffconcat version 1.0\nfile '../default.png'\nfile 'default.png'\n"
    status, body, _ = await upload_video(guarded.url, playlist, "a.mp4")
    assert (status, body["error"]["code"]) == (422, "unreadable") and "MP4" in body["error"]["message"], body
    hls = b"\x00\x00\x00\x18ftypisom#EXTM3U\n#EXTINF:10,\nfile:///etc/passwd\n"
    status, body, _ = await upload_video(guarded.url, hls, "b.mp4")
    assert (status, body["error"]["code"]) == (422, "unreadable"), body
    status, body, _ = await upload_video(guarded.url, wide_clip(tmp_path / "wide.mkv").read_bytes(), "wide.mkv")
    assert (status, body["error"]["code"]) == (422, "video_too_large"), body
    async with aiohttp.ClientSession() as http:
        async with http.get(guarded.url + "/v1/avatars") as res:
            assert [a["avatar_id"] for a in await res.json()] == ["default"]
        form = aiohttp.FormData()  # a photo starts the photo helper; the last test sees it end
        form.add_field("image", (ASSETS / "closed-mouth.png").read_bytes(), filename="me.png",
                       content_type="image/png")
        async with http.post(guarded.url + "/v1/avatars", data=form) as res:
            assert res.status == 201, await res.text()
            avatar_id = (await res.json())["avatar_id"]
        async with http.delete(f"{guarded.url}/v1/avatars/{avatar_id}") as res:
            assert res.status == 204


# --- afterwards: everything back where it was ---------------------------------------------------
async def test_zz_descriptors_threads_processes_memory_and_disk_return_to_baseline(guarded):
    """Threads may also include asyncio's default executor's idle workers: a pool bounded at
    min(32, cores + 4) that Python keeps (py-spy shows them as `asyncio_N`), not a leak."""
    baseline, pool = guarded.baseline, min(32, (os.cpu_count() or 1) + 4)
    allowed = {k: math.ceil(v * 1.05) + (pool if k == "threads" else 0) for k, v in baseline.items()}
    deadline = time.monotonic() + 40  # the photo helper ends 10 s after its last use
    while True:
        now = resources(guarded)
        over = {k: (baseline[k], v) for k, v in now.items() if v > allowed[k] and k != "rss_mb"}
        if not over or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    print(f"resources before the probes {baseline}, after {now}")
    assert not over, f"not back to baseline (before, now): {over}"


async def test_zz_memory_stops_growing_when_the_probes_are_repeated(guarded, net):
    """Sessions raise the allocator's high-water mark (229 -> 257 MB over six rounds of two
    sessions without any broadcast, then flat); what the probes themselves keep must not
    grow: a second round of sessions and hostile answers adds under 5 %."""
    first = resources(guarded)["rss_mb"]
    viewer, other = await playing(guarded.url), await playing(guarded.url)
    for path, _, _ in HOSTILE_ANSWERS[:-1]:
        posted = time.time()
        await post_broadcast(guarded.url, viewer.session_id, f"http://127.0.0.1:{net.whip_port}{path}")
        await viewer.wait_event("broadcast_error", 20, after=posted)
        assert await stop_broadcast(guarded.url, viewer.session_id) == 204
    await viewer.close()
    await other.close()
    await asyncio.sleep(2)
    again = resources(guarded)["rss_mb"]
    print(f"RSS before the probes {guarded.baseline['rss_mb']:.0f} MB, after {first:.0f}, after one more "
          f"round {again:.0f}")
    assert again <= first * 1.05 and first <= guarded.baseline["rss_mb"] * 1.25, (guarded.baseline, first, again)
