"""Headless Debian chromium driven by Playwright (never a downloaded browser), fake media devices."""

from __future__ import annotations

import base64
from pathlib import Path

import cv2
import numpy as np
import pytest
import pytest_asyncio

from testkit.audio import write_wav
from testkit.browser import CHROMIUM
from testkit.server import ARTIFACTS


@pytest.fixture(scope="session")
def microphone_wav(jfk_pcm48) -> Path:
    """jfk.flac as the WAV Chromium plays into its fake microphone (it loops)."""
    return write_wav(ARTIFACTS / "fake-microphone.wav", jfk_pcm48)


@pytest_asyncio.fixture(scope="session")
async def browser(microphone_wav):
    # The async API: the sync one runs its own event loop and would starve pytest-asyncio's.
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={microphone_wav}",
                "--autoplay-policy=no-user-gesture-required",
                # Plain host candidates: aiortc cannot resolve Chromium's mDNS .local names.
                "--disable-features=WebRtcHideLocalIpsWithMdns",
            ],
        )
        yield browser
        await browser.close()


# The page's peer connections, kept where a test can read their stats (window.__pcs).
KEEP_PEER_CONNECTIONS = """
    window.__pcs = [];
    window.RTCPeerConnection = class extends window.RTCPeerConnection {
        constructor(...args) { super(...args); window.__pcs.push(this); }
    };
"""


@pytest_asyncio.fixture
async def page(browser, server):
    """A fresh page on the server; fails the test if the page logged any console error."""
    context = await browser.new_context(viewport={"width": 1200, "height": 900}, permissions=["microphone"])
    await context.add_init_script(KEEP_PEER_CONNECTIONS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(20_000)
    await page.goto(server.url + "/")
    yield page
    await context.close()
    assert not errors, f"console errors: {errors}"


async def video_frame(page) -> np.ndarray:
    """The picture the <video> element shows right now, as RGB pixels."""
    await page.wait_for_function("() => document.querySelector('video').videoWidth > 0")
    data_url = await page.evaluate(
        """() => {
            const v = document.querySelector('video');
            const c = document.createElement('canvas');
            c.width = v.videoWidth; c.height = v.videoHeight;
            c.getContext('2d').drawImage(v, 0, 0);
            return c.toDataURL('image/png');
        }"""
    )
    raw = np.frombuffer(base64.b64decode(data_url.split(",", 1)[1]), np.uint8)
    return cv2.cvtColor(cv2.imdecode(raw, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


async def wait_playing(page) -> None:
    await page.wait_for_function(
        "() => { const v = document.querySelector('video');"
        " return v.readyState >= 2 && v.currentTime > 0.2 && v.videoWidth === 512; }"
    )


async def video_delay_ms(page, over_ms: int = 500) -> float:
    """How long the browser now takes from receiving a video frame to having it decoded
    (its jitter buffer and decoder; getStats' totalProcessingDelay per frame over the last
    `over_ms`): the time by which what the page shows trails what the server sent."""
    read = """() => Promise.all(window.__pcs.filter((pc) => pc.connectionState === 'connected').map(async (pc) => {
        let out = null;
        (await pc.getStats()).forEach((s) => {
            if (s.type === 'inbound-rtp' && s.kind === 'video') out = [s.totalProcessingDelay, s.framesDecoded];
        });
        return out;
    }))"""
    before = [s for s in await page.evaluate(read) if s]
    await page.wait_for_timeout(over_ms)
    after = [s for s in await page.evaluate(read) if s]
    if not before or not after:
        return 0.0
    (delay0, frames0), (delay1, frames1) = before[-1], after[-1]
    return 1000 * (delay1 - delay0) / max(frames1 - frames0, 1)
