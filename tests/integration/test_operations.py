"""Operations: admission control, token, CORS, worker crash and restart, metrics, WHEP, SIGTERM."""

import asyncio
import os
import signal
import time

import aiohttp
import psutil
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription

from avatar_client import AvatarViewer
from testkit.server import ServerProcess

pytestmark = pytest.mark.integration
TOKEN = "s3cret-token"
ALLOWED = "http://allowed.example"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def ops_server():
    env = {"AVATAR_MAX_SESSIONS": "1", "AVATAR_TOKEN": TOKEN, "AVATAR_ALLOWED_ORIGINS": ALLOWED}
    with ServerProcess(env=env) as proc:
        yield proc


class TokenViewer(AvatarViewer):
    """The viewer, sending the token on every request."""

    def __init__(self, url: str, **kwargs):
        super().__init__(url, **kwargs)
        self._http._default_headers.update(AUTH)

    async def events(self):
        return await self._http.ws_connect(f"{self.base_url}/v1/sessions/{self.session_id}/events?token={TOKEN}")


async def health(url: str) -> dict:
    async with aiohttp.ClientSession(headers=AUTH) as http:  # the details need the token
        async with http.get(url + "/healthz") as res:
            return await res.json()


async def test_requests_without_the_token_are_refused(ops_server):
    async with aiohttp.ClientSession() as http:
        for method, path in (("POST", "/v1/sessions"), ("GET", "/v1/avatars"), ("POST", "/whep"),
                             ("GET", "/v1/sessions/x/events")):
            async with http.request(method, ops_server.url + path, json={}) as res:
                body = await res.json()
                assert res.status == 401 and body["error"]["code"] == "unauthorized", path
                assert res.headers["WWW-Authenticate"] == "Bearer"
        async with http.get(ops_server.url + "/v1/avatars", headers={"Authorization": "Bearer wrong"}) as res:
            assert res.status == 401
        async with http.get(ops_server.url + "/v1/avatars", headers=AUTH) as res:
            assert res.status == 200
        lower = {"Authorization": AUTH["Authorization"].replace("Bearer", "bearer")}
        async with http.get(ops_server.url + "/v1/avatars", headers=lower) as res:
            assert res.status == 200  # auth schemes are case-insensitive (RFC 9110)
        async with http.get(ops_server.url + "/healthz") as res:
            assert res.status == 200  # health stays open for load balancers, and says no more than that
            assert await res.json() == {"status": "ok"}
        async with http.get(ops_server.url + "/metrics") as res:
            assert res.status == 401


async def test_cors_lets_allowed_origins_embed_and_no_one_else(ops_server):
    async with aiohttp.ClientSession() as http:
        async with http.options(ops_server.url + "/v1/sessions", headers={
                "Origin": ALLOWED, "Access-Control-Request-Method": "POST"}) as res:
            assert res.status == 204 and res.headers["Access-Control-Allow-Origin"] == ALLOWED
            assert "Authorization" in res.headers["Access-Control-Allow-Headers"]
        async with http.get(ops_server.url + "/v1/avatars", headers={"Origin": ALLOWED, **AUTH}) as res:
            assert res.headers["Access-Control-Allow-Origin"] == ALLOWED
        async with http.get(ops_server.url + "/v1/avatars", headers={"Origin": "http://evil.example", **AUTH}) as res:
            assert "Access-Control-Allow-Origin" not in res.headers
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await http.ws_connect(ops_server.url + f"/v1/sessions/x/events?token={TOKEN}",
                                  headers={"Origin": "http://evil.example"})
        assert err.value.status == 403


async def test_tokens_never_reach_the_log(ops_server):
    viewer = TokenViewer(ops_server.url)
    await viewer.connect()
    ws = await viewer.events()  # the token travels in the query string here
    await ws.close()
    await viewer.close()
    await asyncio.sleep(0.5)
    log = open(ops_server.log.name).read()
    assert "/events" in log and TOKEN not in log


async def test_admission_control_refuses_beyond_capacity_and_spares_admitted_sessions(ops_server):
    first = TokenViewer(ops_server.url)
    await first.connect()
    try:
        await first.wait_frames(10)
        assert (await health(ops_server.url))["available"] == 0
        second = TokenViewer(ops_server.url)
        with pytest.raises(RuntimeError, match="503") as err:
            await second.connect()
        assert "at_capacity" in str(err.value)
        await second.close(delete=False)
        async with aiohttp.ClientSession(headers=AUTH) as http:
            async with http.post(ops_server.url + "/v1/sessions", json={"sdp": "v=0\r\nm=video 9 x\r\n"}) as res:
                assert res.status in (400, 503)
        before = first.video_count
        await asyncio.sleep(1.0)
        assert first.video_count - before >= 20, "the admitted session suffered"
    finally:
        assert await first.close() == 204
    third = TokenViewer(ops_server.url)
    await third.connect()
    await third.wait_frames(5)
    await third.close()


async def test_a_killed_worker_fails_its_sessions_and_is_restarted(ops_server):
    viewer = TokenViewer(ops_server.url)
    await viewer.connect()
    await viewer.record_events()
    try:
        await viewer.wait_frames(10)
        info = await health(ops_server.url)
        pid = info["workers"][0]["pid"]
        os.kill(pid, signal.SIGKILL)
        error = await viewer.wait_event("error", 10)
        assert error["code"] == "worker_died"
        for _ in range(60):
            info = await health(ops_server.url)
            if info["worker_restarts"] == 1 and info["sessions"] == 0 and info["workers"][0]["pid"] != pid:
                break
            await asyncio.sleep(0.5)
        assert info["worker_restarts"] == 1 and info["sessions"] == 0
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        await viewer.close(delete=False)
    after = TokenViewer(ops_server.url)  # the next session works
    await after.connect()
    await after.wait_frames(10, timeout=60)
    await after.close()
    async with aiohttp.ClientSession(headers=AUTH) as http:
        async with http.get(ops_server.url + "/metrics") as res:
            text = await res.text()
    assert "avatar_worker_restarts_total 1.0" in text


async def test_metrics_report_sessions_frames_and_first_frame_times(server):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    await viewer.wait_frames(30)
    await viewer.post("interrupt")
    async with aiohttp.ClientSession() as http:
        async with http.get(server.url + "/metrics") as res:
            assert res.status == 200 and res.content_type == "text/plain"
            text = await res.text()
    await viewer.close()
    for name in ("avatar_sessions ", "avatar_session_fps_min ", "avatar_frames_played_total",
                 "avatar_frames_held_total", "avatar_time_to_first_frame_seconds_count",
                 "avatar_worker_restarts_total", "avatar_interrupts_total", "avatar_session_queue_frames_max "):
        assert name in text, name
    assert viewer.session_id not in text  # ids are what protects a session when no token is set
    played_line = next(line for line in text.splitlines() if line.startswith("avatar_frames_played_total"))
    played = float(played_line.split()[-1])
    assert played >= 30


async def test_whep_player_can_watch_and_leave(server):
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    got = asyncio.get_running_loop().create_future()

    @pc.on("track")
    def on_track(track):
        if track.kind == "video":
            asyncio.ensure_future(_first(track, got))

    await pc.setLocalDescription(await pc.createOffer())
    async with aiohttp.ClientSession() as http:
        async with http.post(server.url + "/whep", data=pc.localDescription.sdp,
                             headers={"Content-Type": "application/sdp"}) as res:
            assert res.status == 201 and res.content_type == "application/sdp"
            location, answer = res.headers["Location"], await res.text()
        await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
        frame = await asyncio.wait_for(got, 10)
        assert (frame.width, frame.height) == (512, 512)
        async with http.delete(server.url + location) as res:
            assert res.status == 200
        async with http.delete(server.url + location) as res:
            assert res.status == 404
        async with http.post(server.url + "/whep", data="v=0", headers={"Content-Type": "text/plain"}) as res:
            assert res.status == 415
    await pc.close()


async def _first(track, future):
    frame = await track.recv()
    if not future.done():
        future.set_result(frame)


def test_sigterm_closes_sessions_and_workers_and_exits_cleanly():
    proc = ServerProcess()
    proc.wait_ready()
    children = psutil.Process(proc.proc.pid).children(recursive=True)
    started = time.monotonic()
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.proc.wait(30) == 0
    proc.log.close()
    assert time.monotonic() - started < 20
    time.sleep(1)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
