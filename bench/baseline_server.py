"""The baseline: a bare aiortc server with synthetic tracks (stock settings), same session API.

Used by bench/session.py to measure, in the same run, what plain aiortc costs on
this machine: time to first frame, frame rate and CPU with no avatar work at all.
"""

from __future__ import annotations

import argparse
import fractions

import av
import numpy as np
from aiohttp import web
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack, VideoStreamTrack

from engine.package_files import top_level_folder


class SyntheticVideo(VideoStreamTrack):
    """A moving gradient, 512x512 at 25 fps (aiortc's default pacing would be 30)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.base = np.tile(np.arange(512, dtype=np.uint8), (512, 1))

    async def recv(self) -> av.VideoFrame:
        pts, _ = await self.next_timestamp()
        self.n += 1
        rgb = np.dstack([np.roll(self.base, self.n * 4, 1), self.base.T, np.full((512, 512), 128, np.uint8)])
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts, frame.time_base = pts, fractions.Fraction(1, 90000)
        return frame


async def create_session(request: web.Request) -> web.Response:
    body = await request.json()
    pc = RTCPeerConnection()
    request.app["pcs"].add(pc)
    pc.addTrack(SyntheticVideo())
    pc.addTrack(AudioStreamTrack())
    await pc.setRemoteDescription(RTCSessionDescription(body["sdp"], "offer"))
    await pc.setLocalDescription(await pc.createAnswer())
    return web.json_response({"session_id": str(id(pc)), "sdp": pc.localDescription.sdp,
                              "type": "answer"}, status=201)


async def accepted(request: web.Request) -> web.Response:
    return web.json_response({"utterance_id": "none"}, status=202)


async def no_content(request: web.Request) -> web.Response:
    return web.Response(status=204)


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def events(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for _ in ws:
        pass
    return ws


async def blank_page(request: web.Request) -> web.Response:
    return web.Response(text="<!doctype html><title>baseline</title>", content_type="text/html")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app["pcs"] = set()
    app.router.add_post("/v1/sessions", create_session)
    app.router.add_post("/v1/sessions/{id}/speak", accepted)
    app.router.add_delete("/v1/sessions/{id}", no_content)
    app.router.add_get("/healthz", health)
    app.router.add_get("/v1/sessions/{id}/events", events)
    app.router.add_get("/", blank_page)
    app.router.add_get("/favicon.ico", lambda request: web.Response(status=204))
    app.router.add_static("/web/", top_level_folder("web"))
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
