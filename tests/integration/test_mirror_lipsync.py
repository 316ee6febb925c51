"""Mirror mode over real WebRTC: the received mouth follows the real voice the viewer hears,
for the default portrait and for a video avatar of a real person."""

import asyncio

import numpy as np
import pytest
import pytest_asyncio

from avatar_client import AvatarViewer
from engine.families.video.tracking import frames_opening
from testkit.server import SHARED_DATA
from training.motion.real_data import lagged_corr

pytestmark = pytest.mark.integration
SPEECH = SHARED_DATA / "jfk.flac"  # a real person's voice, 11 s
MAX_LAG = 4
AUDIO_PREFETCH_S = 0.08  # aiortc's receiver holds 4 audio packets (20 ms each) before it plays any;
# its video has no such wait, and nothing here syncs the two by RTCP as a browser does


def heard_level(viewer: AvatarViewer) -> tuple[np.ndarray, np.ndarray]:
    """Each received video frame's opening and the level (dB) of the audio that arrived with it."""
    times = np.array([t for t, _ in viewer.received.audio]) - AUDIO_PREFETCH_S
    packets = [p.astype(np.float64) for _, p in viewer.received.audio]
    level = []
    for t, _ in viewer.received.video:
        near = [packets[i] for i in np.where((times > t - 0.04) & (times <= t))[0]]
        x = np.concatenate(near) if near else np.zeros(1)
        level.append(20 * np.log10(np.sqrt((x**2).mean()) + 1.0))
    return frames_opening([f for _, f in viewer.received.video]), np.array(level)


@pytest_asyncio.fixture(scope="module")
async def video_avatar(server, tmp_path_factory) -> str:
    """A video avatar of a real person on the shared server (prepared once, then cached)."""
    import time

    import aiohttp

    from tests.video import person_clip

    clip = person_clip(tmp_path_factory.mktemp("clip") / "person.mp4")

    async with aiohttp.ClientSession() as http:
        form = aiohttp.FormData()
        form.add_field("video", clip.read_bytes(), filename="person.mp4", content_type="video/mp4")
        async with http.post(server.url + "/v1/avatars", data=form) as res:
            body = await res.json()
            assert res.status in (200, 202), body
        deadline = time.monotonic() + 120
        while body["status"] == "preparing" and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
            async with http.get(f"{server.url}/v1/avatars/{body['avatar_id']}") as res:
                body = await res.json()
    assert body["status"] == "ready", body
    return body["avatar_id"]


async def test_mirror_mouth_follows_the_heard_real_voice(server):
    await assert_mouth_follows_voice(server.url, "default")


async def test_a_video_avatar_mouth_follows_the_heard_real_voice(server, video_avatar):
    await assert_mouth_follows_voice(server.url, video_avatar)


async def assert_mouth_follows_voice(url: str, avatar: str) -> None:
    viewer = AvatarViewer(url, avatar=avatar, mode="mirror", microphone=str(SPEECH), keep_frames=600)
    await viewer.connect()
    try:
        await viewer.wait_frames(25, timeout=30)
        await asyncio.sleep(12.0)  # the whole recording, spoken into the microphone
    finally:
        await viewer.close()
    opening, level = heard_level(viewer)  # face mesh on 600 frames: seconds, so not while connected
    speech = level > level.max() - 45  # the part of the stream that carries the voice, and its pauses
    first, last = np.argmax(speech), len(speech) - np.argmax(speech[::-1])
    opening, level = opening[first:last], level[first:last]
    assert len(opening) > 150, f"only {len(opening)} frames with the voice"
    corr = {lag: lagged_corr(opening, level, lag) for lag in range(-MAX_LAG, MAX_LAG + 1)}
    best = max(corr, key=corr.get)
    print(f"received mouth vs heard voice, correlation by lag (frames): {corr}")
    assert corr[best] >= 0.3, f"the mouth does not follow the heard voice: {corr}"
    assert abs(best) <= 1, f"mouth and voice are {best} frames apart: {corr}"
