"""Congestion control over a real narrow link: the server runs in a network namespace of
its own, joined to this one by a veth pair whose server side is limited and made lossy:
`tc netem` where the kernel has it, else `tc tbf` for the rate and an iptables rule
that drops 1 % of packets at random. The viewer's bandwidth estimate (REMB) and the loss
in its receiver reports must bring the video bitrate down while the link is narrow and back
up when it is lifted, with frames flowing all along (the viewer gives up on a packet that
never comes, avatar_client/jitter.py)."""

import asyncio
import time

import pytest

from avatar_client import AvatarViewer
from testkit import shaped_link
from testkit.server import ServerProcess

pytestmark = pytest.mark.integration
def kbps_between(events: list[dict], t0: float, t1: float) -> list[float]:
    return [e["video_kbps"] for e in events if e["type"] == "stats" and t0 <= e["t"] <= t1]


@pytest.fixture(scope="module")
def narrowed(link) -> dict:
    """One session through a wide, then narrow, then wide again link: what was measured."""
    return asyncio.run(_narrow_and_widen())


async def _narrow_and_widen() -> dict:
    with ServerProcess(host=shaped_link.NS_IP, prefix=("ip", "netns", "exec", shaped_link.NS)) as server:
        viewer = AvatarViewer(server.url)
        await viewer.connect()
        events = await viewer.record_events()
        try:
            await viewer.wait_frames(25, timeout=20)
            await viewer.post("speak", {"text": "I keep talking while the network changes under me. " * 8})
            await asyncio.sleep(6)
            wide = kbps_between(events, time.time() - 3, time.time())
            shaped_link.narrow_the_link()
            limited_at = time.time()
            await asyncio.sleep(9)
            frames_before = viewer.video_count
            await asyncio.sleep(6)
            narrow = kbps_between(events, limited_at + 8, time.time())
            limited_fps = (viewer.video_count - frames_before) / 6  # once the bitrate has settled
            shaped_link.widen_the_link()
            lifted_at = time.time()
            await viewer.post("speak", {"text": "Now the link is wide again and I go on talking. " * 8})
            await asyncio.sleep(20)
            recovered = kbps_between(events, lifted_at + 12, time.time())
        finally:
            await viewer.close()
    measured = {"wide_kbps": wide, "narrow_kbps": narrow, "limited_fps": round(limited_fps, 1),
                "recovered_kbps": recovered}
    print(measured)
    return measured


def test_bitrate_falls_below_a_narrow_lossy_link(narrowed):
    assert min(narrowed["wide_kbps"]) > 600, narrowed
    assert max(narrowed["narrow_kbps"]) < 420, f"the bitrate did not follow the 400 kbit/s link: {narrowed}"


def test_frames_flow_on_the_narrow_link_and_the_bitrate_recovers(narrowed):
    assert narrowed["limited_fps"] > 10, f"frames stopped flowing on the narrow link: {narrowed}"
    assert max(narrowed["recovered_kbps"]) > 600, f"the bitrate did not recover: {narrowed}"
