"""A hostile or careless client against a real server: every answer is a clear 4xx or the
service goes on working, and nothing leaks (memory, ring slots, sockets, capacity).

Numbers in the test names are the items of the reliability issue.
"""

import asyncio
import json
import re
import time

import aiohttp
import numpy as np
import pytest
from aiortc import RTCPeerConnection

from avatar_client import AgentClient, AvatarViewer
from testkit.server import ServerProcess

pytestmark = pytest.mark.integration


async def offer() -> tuple[RTCPeerConnection, str]:
    """A real aiortc offer (video and audio to receive), and the peer that made it."""
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


async def health(url: str) -> dict:
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/healthz") as res:
            return await res.json()


async def raw_request(port: int, parts: list[bytes], pause: float = 0.05) -> tuple[int, bytes]:
    """Send a request in several TCP writes; the status and body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for part in parts:
        writer.write(part)
        await writer.drain()
        await asyncio.sleep(pause)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length")), 0)
    body = await reader.readexactly(length)
    writer.close()
    return int(head.split()[1]), body


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A server of its own: room for a burst, small stores, one session per address at most 6."""
    env = {"AVATAR_MAX_SESSIONS": "8", "AVATAR_MAX_AVATARS": "2", "AVATAR_MAX_SESSIONS_PER_CLIENT": "6",
           "AVATAR_AVATARS_DIR": str(tmp_path_factory.mktemp("avatars"))}
    with ServerProcess(env) as proc:
        yield proc


# --- 1: the agent audio socket --------------------------------------------------
LOST = "connection lost while sending"


async def oversized_frame_answer(ws: aiohttp.ClientWebSocketResponse) -> object:
    """How the server answers a frame over its limit: a close, or, when it closes before the
    client has written the whole frame, the client's own write fails (both are a refusal; an
    answer of any other kind means the frame was taken)."""
    try:
        await ws.send_bytes(np.zeros(1 << 20, np.int16).tobytes())
        return (await ws.receive(timeout=10)).type
    except (ConnectionError, aiohttp.ClientConnectionError):
        return LOST


async def test_1_oversized_agent_frames_are_refused_and_leave_no_memory_behind(server):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    before = rss_mb(server.proc.pid)
    agent = AgentClient(server.url, viewer.session_id)
    closes = []
    try:
        for _ in range(3):  # 2 MB frames at 8 kHz: 131 s of audio each
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(f"{server.url}/v1/sessions/{viewer.session_id}/audio?rate=8000") as ws:
                    closes.append(await oversized_frame_answer(ws))
        assert all(t in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, LOST) for t in closes), closes
        # Within the frame limit but over the 5 s per message: an error event, the socket lives.
        voice = await agent.open_audio(8000)
        await voice.push(np.zeros(8000 * 6, np.int16))
        error = json.loads((await voice.ws.receive(timeout=5)).data)
        assert error["code"] == "audio_too_long" and "5 s" in error["message"]
        await voice.close()
    finally:
        await agent.close()
        await viewer.close()
    await asyncio.sleep(1.0)
    assert rss_mb(server.proc.pid) - before < 150


async def test_1_a_producer_blocked_on_a_full_queue_ends_with_its_session(server):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(f"{server.url}/v1/sessions/{viewer.session_id}/audio?rate=48000")
        try:
            for _ in range(25):  # 25 s of audio: more than the 20 s queue, so the socket blocks
                await ws.send_bytes(np.full(48000, 100, np.int16).tobytes())
            await asyncio.sleep(1.0)
        finally:
            assert await viewer.close() == 204
        t0 = time.monotonic()
        while not ws.closed and time.monotonic() - t0 < 5:
            await ws.receive(timeout=5 - (time.monotonic() - t0))
        assert ws.closed, "the socket outlived its session"
        assert time.monotonic() - t0 < 3


# --- 2: ring slots --------------------------------------------------------------
async def health_until(url: str, done, timeout: float = 10.0) -> dict:
    """/healthz, polled until `done(health)` or `timeout` (then as it is)."""
    deadline = time.monotonic() + timeout
    while not done(answer := await health(url)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return answer


async def slots_until(url: str, done, timeout: float = 10.0) -> list[int]:
    """The workers' free ring slots, polled until `done(slots)` or `timeout` (then as they are)."""
    slots = lambda h: [w["free_frame_slots"] for w in h["workers"]]  # noqa: E731
    return slots(await health_until(url, lambda h: done(slots(h)), timeout))



async def test_2_a_burst_of_sessions_gives_back_every_ring_slot(limited):
    free = [w["free_frame_slots"] for w in (await health(limited.url))["workers"]]
    peers = await asyncio.gather(*(offer() for _ in range(6)))
    async with aiohttp.ClientSession() as http:
        async def create(sdp):
            async with http.post(limited.url + "/v1/sessions", json={"sdp": sdp}) as res:
                return res.status, await res.json()

        created = await asyncio.gather(*(create(sdp) for _, sdp in peers))
        assert all(status == 201 for status, _ in created), created
        in_use = await slots_until(limited.url, lambda now: sum(now) < sum(free))  # the pumps render
        assert sum(in_use) < sum(free), "no session took a ring slot: the test would prove nothing"
        for _, body in created:
            async with http.delete(f"{limited.url}/v1/sessions/{body['session_id']}") as res:
                assert res.status == 204
    for pc, _ in peers:
        await pc.close()
    assert await slots_until(limited.url, lambda now: now == free) == free
    viewer = AvatarViewer(limited.url)
    await viewer.connect()
    try:
        await viewer.wait_frames(25, timeout=10)
    finally:
        await viewer.close()


# --- 3 and 4: one session's backlog, interrupted speech -------------------------
async def test_3_4_a_backlog_neither_starves_another_session_nor_reports_cancelled_speech(server):
    a, b = AvatarViewer(server.url), AvatarViewer(server.url)
    await a.connect()
    await b.connect()
    events_a = await a.record_events()
    await b.record_events()  # b.wait_event reads what this records
    try:
        await a.wait_frames(10)
        statuses = [(await a.post("speak", {"text": f"Sentence number {i} of a long backlog."}))
                    for i in range(40)]
        accepted = [body["utterance_id"] for status, body in statuses if status == 202]
        refused = [body for status, body in statuses if status == 429]
        assert 0 < len(accepted) < 40 and refused
        assert refused[0]["error"]["code"] == "speech_queue_full" and "16" in refused[0]["error"]["message"]
        t0 = time.time()
        status, _ = await b.post("speak", {"text": "Hello from the other session."})
        assert status == 202
        started = await b.wait_event("speak_started", 8)
        assert started["t"] - t0 < 5, "another session's backlog delayed this one"
        await a.wait_event("speak_started", 10)
        status, cancelled = await a.post("interrupt")
        assert status == 202
        await asyncio.sleep(3.0)
        interrupted_at = next(e["t"] for e in events_a if e["type"] == "interrupted")
        late = [e for e in events_a if e["t"] > interrupted_at and (e["type"] == "speak_started" or (
            e["type"] == "speak_ended" and not e["interrupted"]))]
        assert not late, f"{len(late)} cancelled utterances were reported as played"
        ended = {e["utterance_id"] for e in events_a if e["type"] == "speak_ended"}
        assert set(accepted) <= ended, "every accepted utterance's sequence ends, the cut ones too"
        again = await a.post("speak", {"text": "After the interrupt."})
        assert again[0] == 202
        restarted = await a.wait_event("speak_started", 8, after=time.time() - 0.1)
        assert restarted["utterance_id"] == again[1]["utterance_id"]
    finally:
        await a.close()
        await b.close()


# --- 5: bodies in several writes ------------------------------------------------
async def test_5_a_body_in_several_writes_or_chunks_is_read_whole(server):
    body = json.dumps({"sdp": "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n", "mode": "dance"}).encode()
    head = (f"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    status, answer = await raw_request(server.port, [head, body[:10], body[10:30], body[30:]])
    assert (status, json.loads(answer)["error"]["code"]) == (400, "bad_mode")  # the JSON was read whole
    chunked = (b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    chunks = [b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:25], body[25:])] + [b"0\r\n\r\n"]
    status, answer = await raw_request(server.port, [chunked, *chunks])
    assert (status, json.loads(answer)["error"]["code"]) == (400, "bad_mode")
    pc, sdp = await offer()
    raw = sdp.encode()
    whep = (f"POST /whep HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\n"
            f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n").encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    for part in (whep, raw[:200], raw[200:]):
        writer.write(part)
        await writer.drain()
        await asyncio.sleep(0.05)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
    writer.close()
    await pc.close()
    assert head.split()[1] == b"201", head
    location = next(line.split(b": ")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"location"))
    async with aiohttp.ClientSession() as http:
        async with http.delete(server.url + location.decode()) as res:
            assert res.status == 200


# --- 6: deep JSON ---------------------------------------------------------------
async def test_6_deeply_nested_json_is_a_400_and_an_error_event(server):
    deep = "[" * 100_000 + "]" * 100_000
    async with aiohttp.ClientSession() as http:
        async with http.post(server.url + "/v1/sessions", data=deep,
                             headers={"Content-Type": "application/json"}) as res:
            assert res.status == 400 and (await res.json())["error"]["code"] == "bad_json"
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    try:
        async with aiohttp.ClientSession() as http:
            for path, code in (("events", "bad_message"), ("audio", "bad_message")):
                async with http.ws_connect(f"{server.url}/v1/sessions/{viewer.session_id}/{path}") as ws:
                    await ws.send_str(deep)
                    while (event := await ws.receive_json(timeout=5))["type"] != "error":
                        pass
                    assert event["code"] == code
                    await ws.send_str(deep)  # the socket lives on: the next bad message is answered too
                    while (event := await ws.receive_json(timeout=5))["type"] != "error":
                        pass
                    assert event["code"] == code and not ws.closed
    finally:
        await viewer.close()


# --- 7: bad SDP -----------------------------------------------------------------
def _rtx_only(sdp: str) -> str:
    lines, video = [], False
    for line in sdp.split("\r\n"):
        if line.startswith("m="):
            video = line.startswith("m=video")
        if video and line.startswith("a=rtpmap:") and "rtx/" not in line:
            continue
        lines.append(line)
    return "\r\n".join(lines)


@pytest.mark.parametrize("mangle", [
    _rtx_only,
    lambda sdp: sdp.replace("H264/90000", "XYZ/90000").replace("VP8/90000", "XYZ/90000"),
    lambda sdp: re.sub(r"m=video \d+", "m=video abc", sdp),
    lambda sdp: "\r\n".join(line for line in sdp.split("\r\n") if not line.startswith("a=fingerprint")),
    lambda sdp: "\r\n".join(line for line in sdp.split("\r\n") if not line.startswith("a=setup")),
], ids=["rtx-only", "unknown-codec", "bad-port", "no-fingerprint", "no-setup"])
async def test_7_bad_sdp_is_a_400_in_plain_words(server, mangle):
    pc, sdp = await offer()
    await pc.close()
    sessions = (await health(server.url))["sessions"]
    async with aiohttp.ClientSession() as http:
        async with http.post(server.url + "/v1/sessions", json={"sdp": mangle(sdp)}) as res:
            body = await res.json()
    assert res.status == 400 and body["error"]["code"] == "bad_sdp", body
    assert not any(word in body["error"]["message"] for word in ("NoneType", "Traceback", "object has no"))
    assert (await health(server.url))["sessions"] == sessions


# --- 8: empty binary frames -----------------------------------------------------
async def test_8_an_empty_binary_frame_is_ignored(server):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(f"{server.url}/v1/sessions/{viewer.session_id}/audio?rate=16000") as ws:
                await ws.send_bytes(b"")
                await ws.send_bytes(np.full(1600, 500, np.int16).tobytes())
                message = await ws.receive_json(timeout=5)
                assert message["type"] == "utterance"
    finally:
        await viewer.close()


# --- 9 and 12: the avatar store -------------------------------------------------
def _png(rgb: np.ndarray) -> bytes:
    import cv2

    return cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))[1].tobytes()


async def test_9_12_a_pathological_image_fails_alone_and_the_store_has_a_cap_and_delete(limited):
    import io

    from PIL import Image

    from tests.integration.test_avatars import upload

    strip = io.BytesIO()
    Image.new("RGB", (65535, 381), (200, 180, 160)).save(strip, "PNG")
    import skimage.data

    photo = skimage.data.astronaut()
    first, bad = await asyncio.gather(upload(limited.url, _png(photo[10:, 10:]), "a.png"),
                                      upload(limited.url, strip.getvalue(), "strip.png"))
    assert first[0] == 201, first
    assert bad[0] in (413, 422) and bad[1]["error"]["code"] in ("image_too_large", "bad_image")
    second = await upload(limited.url, _png(photo[20:, 5:]), "b.png")
    assert second[0] == 201, second
    third = await upload(limited.url, _png(photo[5:, 25:]), "c.png")
    assert third[0] == 409 and third[1]["error"]["code"] == "too_many_avatars" and "2" in third[1]["error"]["message"]
    async with aiohttp.ClientSession() as http:
        async with http.delete(f"{limited.url}/v1/avatars/{first[1]['avatar_id']}") as res:
            assert res.status == 204
        async with http.delete(f"{limited.url}/v1/avatars/default") as res:
            assert res.status == 403 and (await res.json())["error"]["code"] == "default_avatar"
        async with http.delete(f"{limited.url}/v1/avatars/nosuch") as res:
            assert res.status == 404
        async with http.get(limited.url + "/v1/avatars") as res:
            ids = [a["avatar_id"] for a in await res.json()]
    assert first[1]["avatar_id"] not in ids and second[1]["avatar_id"] in ids
    assert (await upload(limited.url, _png(photo[5:, 25:]), "c.png"))[0] == 201


# --- 10: offers that never connect ----------------------------------------------
async def test_10_an_offer_that_never_connects_frees_its_capacity_within_10_s(limited):
    available = (await health(limited.url))["available"]
    pc, sdp = await offer()
    await pc.close()  # this peer will never answer ICE
    async with aiohttp.ClientSession() as http:
        async with http.post(limited.url + "/v1/sessions", json={"sdp": sdp}) as res:
            assert res.status == 201
            session_id = (await res.json())["session_id"]
        async with http.ws_connect(f"{limited.url}/v1/sessions/{session_id}/events") as ws:
            t0 = time.monotonic()
            while (event := await ws.receive_json(timeout=15))["type"] != "error":
                pass
    assert event["code"] == "not_connected" and time.monotonic() - t0 <= 11
    assert (await health_until(limited.url, lambda h: h["available"] == available))["available"] == available


async def test_10_sessions_per_client_address_are_limited_with_the_limit_named(limited):
    peers = [await offer() for _ in range(7)]
    created = []
    async with aiohttp.ClientSession() as http:
        for _, sdp in peers:
            async with http.post(limited.url + "/v1/sessions", json={"sdp": sdp}) as res:
                created.append((res.status, await res.json()))
        for status, body in created:
            if status == 201:
                async with http.delete(f"{limited.url}/v1/sessions/{body['session_id']}"):
                    pass
    for pc, _ in peers:
        await pc.close()
    assert [s for s, _ in created] == [201] * 6 + [429]
    assert created[-1][1]["error"]["code"] == "too_many_sessions"
    assert "6" in created[-1][1]["error"]["message"]


# --- 11: slow clients -----------------------------------------------------------
async def test_11_slow_clients_are_cut_off(server):
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 20) == b""  # closed by the server
    assert time.monotonic() - t0 < 15
    writer.close()
    head = b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    t0 = time.monotonic()
    status, body = await raw_request(server.port, [head, b'{"sdp": '])
    assert status == 408 and json.loads(body)["error"]["code"] == "body_timeout"
    assert time.monotonic() - t0 < 15


# --- smaller items --------------------------------------------------------------
async def test_grey_16_bit_and_phone_mpo_portraits_are_accepted(limited):
    import io

    import skimage.data
    from PIL import Image

    from tests.integration.test_avatars import upload

    async with aiohttp.ClientSession() as http:  # make room in the two-avatar store
        async with http.get(limited.url + "/v1/avatars") as res:
            for avatar in await res.json():
                if not avatar["default"]:
                    await http.delete(f"{limited.url}/v1/avatars/{avatar['avatar_id']}")
    grey = skimage.data.astronaut()[:, :, 1].astype(np.uint16) * 257
    png16 = io.BytesIO()
    Image.fromarray(grey).save(png16, "PNG")
    status, body = await upload(limited.url, png16.getvalue(), "grey16.png")
    assert status == 201, body
    mpo = io.BytesIO()
    frames = [Image.fromarray(skimage.data.astronaut()[8:, 8:]), Image.fromarray(skimage.data.astronaut())]
    frames[0].save(mpo, "MPO", save_all=True, append_images=frames[1:])
    assert Image.open(io.BytesIO(mpo.getvalue())).format == "MPO"
    status, body = await upload(limited.url, mpo.getvalue(), "phone.jpg")
    assert status == 201, body


async def test_static_misses_answer_the_api_error_body(server):
    async with aiohttp.ClientSession() as http:
        async with http.get(server.url + "/static/no-such-file.js") as res:
            assert res.status == 404 and (await res.json())["error"]["code"] == "not_found"


async def test_session_start_end_and_failure_are_logged_without_secrets(limited):
    pc, sdp = await offer()
    await pc.close()
    async with aiohttp.ClientSession() as http:
        async with http.post(limited.url + "/v1/sessions?token=s3cret", json={"sdp": sdp}) as res:
            session_id = (await res.json())["session_id"]
    await asyncio.sleep(11.5)  # it never connects: not_connected after 10 s
    with open(limited.log.name) as f:
        log = f.read()
    assert f"session {session_id} started" in log
    assert f"session {session_id} failed: not_connected" in log
    assert f"session {session_id} ended" in log
    assert "s3cret" not in log
