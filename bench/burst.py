"""After a burst: does the next session start as fast as on a fresh server?

One server. Its time to first frame (offer -> first decoded frame at a real aiortc
viewer, sessions one after another) is measured fresh, which is the baseline; then
`--burst` sessions (the server's capacity) are created at once, half of them connected
and playing, half offers that never connect, and all deleted; then the same time to
first frame is measured again, with the ring slots free before and after. Prints JSON.

    .venv/bin/python bench/burst.py [--burst 8] [--sessions 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

import aiohttp
from aiortc import RTCPeerConnection

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from avatar_client import AvatarViewer  # noqa: E402
from bench.session import ttff  # noqa: E402
from testkit.server import ServerProcess  # noqa: E402


async def free_slots(url: str) -> list[int]:
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/healthz") as res:
            return [w["free_frame_slots"] for w in (await res.json())["workers"]]


async def unconnected(url: str, http: aiohttp.ClientSession) -> str | None:
    """A session whose offer is real but whose peer never answers ICE; its id."""
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    await pc.close()  # gone before the server can reach it
    async with http.post(url + "/v1/sessions", json={"sdp": pc.localDescription.sdp, "type": "offer"}) as res:
        return (await res.json())["session_id"] if res.status == 201 else None


async def burst(url: str, size: int) -> dict:
    viewers = [AvatarViewer(url, keep_frames=1) for _ in range(size // 2)]
    async with aiohttp.ClientSession() as http:
        results = await asyncio.gather(*(v.connect() for v in viewers),
                                       *(unconnected(url, http) for _ in range(size - len(viewers))),
                                       return_exceptions=True)
        await asyncio.gather(*(v.wait_frames(5, timeout=30) for v in viewers), return_exceptions=True)
        played = sum(v.video_count >= 5 for v in viewers)
        for session_id in results[len(viewers):]:
            if isinstance(session_id, str):
                await http.delete(f"{url}/v1/sessions/{session_id}")
    await asyncio.gather(*(v.close() for v in viewers))
    created = sum(1 for r in results if r is not None and not isinstance(r, BaseException))
    return {"created": created, "refused": size - created, "played": played}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--burst", type=int, default=8, help="sessions at once: the server's capacity")
    parser.add_argument("--sessions", type=int, default=5, help="sessions timed before and after")
    args = parser.parse_args()
    env = {"AVATAR_MAX_SESSIONS": str(args.burst), "AVATAR_MAX_SESSIONS_PER_CLIENT": str(args.burst)}
    with ServerProcess(env) as server:
        await ttff(server.url, 1)  # the first session of a process warms it up; not counted
        slots_before = await free_slots(server.url)
        fresh = await ttff(server.url, args.sessions)
        happened = await burst(server.url, args.burst)
        await asyncio.sleep(2.0)  # deleted sessions' last chunks come back
        slots_after = await free_slots(server.url)
        after = await ttff(server.url, args.sessions)
    report = {
        "fresh_ttff_ms_median": round(statistics.median(fresh), 1),
        "after_burst_ttff_ms_median": round(statistics.median(after), 1),
        "fresh_ttff_ms_all": [round(x, 1) for x in fresh],
        "after_burst_ttff_ms_all": [round(x, 1) for x in after],
        "burst": happened,
        "free_ring_slots_before_and_after": [slots_before, slots_after],
        "ratio_after_to_fresh": round(statistics.median(after) / statistics.median(fresh), 2),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
