"""The congestion test's narrow, lossy link (testkit/shaped_link.py) with the viewer users
have: Chromium, through our JS client. Its receiver is libwebrtc's, so this
checks that the server's bitrate control suits a browser's estimate and loss reports."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from testkit.server import ServerProcess
from testkit.shaped_link import NS, NS_IP, narrow_the_link, widen_the_link

pytestmark = pytest.mark.browser

WATCH = """async () => {
    const { AvatarClient } = await import('/web/avatar-client.js');
    const video = document.createElement('video');
    video.muted = true; video.autoplay = true; document.body.append(video);
    window.viewer = new AvatarClient();
    await window.viewer.connect(video);
}"""
RECEIVED = """async () => {
    for (const s of (await window.viewer.pc.getStats()).values())
        if (s.type === 'inbound-rtp' && s.kind === 'video') return [s.framesDecoded, s.bytesReceived];
    return [0, 0];
}"""


async def rates(page, seconds: int) -> list[tuple[float, float]]:
    """(frames decoded per second, kbit/s received) for each of the next `seconds`."""
    out, (frames, received) = [], await page.evaluate(RECEIVED)
    for _ in range(seconds):
        await asyncio.sleep(1)
        now_frames, now_received = await page.evaluate(RECEIVED)
        out.append((now_frames - frames, (now_received - received) * 8 / 1000))
        frames, received = now_frames, now_received
    return out


async def test_chromium_plays_through_a_narrow_lossy_link_and_recovers(browser, link):
    with ServerProcess(host=NS_IP, prefix=("ip", "netns", "exec", NS)) as server:
        context = await browser.new_context()
        page = await context.new_page()
        try:
            await page.goto(server.url + "/")
            await page.evaluate(WATCH)
            await page.evaluate("t => window.viewer.speak(t)", "I keep talking while the network changes. " * 12)
            wide = await rates(page, 5)
            narrow_the_link()
            await rates(page, 8)  # the estimate comes down
            narrow = await rates(page, 6)
            widen_the_link()
            await page.evaluate("t => window.viewer.speak(t)", "Now the link is wide again and I go on. " * 12)
            # Chromium's REMB first creeps up by 10-30 kbit/s a second near the capacity it
            # last saw, then grows ~8 %/s: from ~210 kbit/s it passed 600 after 17-22 s here
            recovered = await rates(page, 40)
        finally:
            await context.close()
    decisions = [line.split(" INFO ")[-1] for line in Path(server.log.name).read_text().splitlines()
                 if "video bitrate" in line]
    measured = {"wide": wide, "narrow": narrow, "recovered": recovered, "server": decisions}
    print(measured)
    assert min(kbps for _, kbps in wide) > 600, measured
    assert max(kbps for _, kbps in narrow) < 420, f"the bitrate did not follow the 400 kbit/s link: {measured}"
    assert sum(fps for fps, _ in narrow) / len(narrow) > 10, f"frames stopped flowing on the narrow link: {measured}"
    assert max(kbps for _, kbps in recovered[25:]) > 600, f"the bitrate did not recover: {measured}"
