"""Many viewers, one encode: receive-only WHEP viewers added to a session see its face at 25 fps
from one shared H.264 stream; they leave with DELETE, and with the session."""

from __future__ import annotations

import asyncio

import aiohttp
import numpy as np
import pytest

from avatar_client import AvatarViewer
from engine.families.video.tracking import track_landmarks
from testkit.whep import WhepViewer

pytestmark = pytest.mark.integration


async def test_added_viewers_watch_one_session_from_one_encode(server):
    owner: AvatarViewer | None = AvatarViewer(server.url)
    await owner.connect()
    viewers = [WhepViewer(server.url, f"/v1/sessions/{owner.session_id}/viewers") for _ in range(3)]
    try:
        await owner.wait_frames(25)
        for viewer in viewers:
            await viewer.connect()
        await asyncio.gather(*(v.wait_frames(25, 30) for v in viewers))
        rates = await asyncio.gather(*(v.fps(3) for v in viewers))
        assert min(rates) >= 23, f"added viewers' frames per second: {rates}"
        assert all(v.audio_frames > 100 for v in viewers), "no sound for the added viewers"
        faces = track_landmarks([v.last for v in viewers])
        assert np.isfinite(faces[:, 0, 0]).all(), "an added viewer does not see the face"
        await owner.post("speak", {"text": "Everyone sees the same mouth."})
        assert await viewers[0].close() == 204
        async with aiohttp.ClientSession() as http:
            async with http.delete(server.url + viewers[0].location) as res:
                assert res.status == 404 and (await res.json())["error"]["code"] == "unknown_viewer"
            async with http.post(f"{server.url}/v1/sessions/nope/viewers", data="v=0",
                                 headers={"Content-Type": "application/sdp"}) as res:
                assert res.status == 404
            async with http.post(f"{server.url}/v1/sessions/{owner.session_id}/viewers", data="nonsense",
                                 headers={"Content-Type": "application/sdp"}) as res:
                assert res.status == 400
        assert min(await asyncio.gather(*(v.fps(2) for v in viewers[1:]))) >= 23, "the others stopped"
        await owner.close()  # the session ends, and its viewers' streams with it
        owner = None
        await asyncio.sleep(1.0)
        assert max(await asyncio.gather(*(v.fps(1.5) for v in viewers[1:]))) == 0, "viewers outlived the session"
    finally:
        if owner:
            await owner.close()
        for viewer in viewers[1:]:
            await viewer.close(leave=False)
