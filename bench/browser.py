"""Benchmark: Connect -> first video frame shown in headless Chromium, beside a bare aiortc server.

Both servers are driven by the same web/avatar-client.js in the same browser, so the
ratio isolates what the avatar adds over plain WebRTC on this machine. Prints JSON.

    .venv/bin/python bench/browser.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.session import BaselineProcess  # noqa: E402
from testkit.browser import CHROMIUM  # noqa: E402
from testkit.server import ServerProcess  # noqa: E402

CONNECT = """async () => {
    const { AvatarClient } = await import('/web/avatar-client.js');
    const video = document.createElement('video');
    video.autoplay = true; video.muted = true; video.playsInline = true;
    document.body.append(video);
    const client = new AvatarClient();
    const shown = new Promise((resolve) => client.addEventListener('first_frame', resolve));
    await client.connect(video);   // starts the clock: the moment a user clicks Connect
    await shown;
    const ms = client.firstFrameMs;
    await client.disconnect();
    video.remove();
    return ms;
}"""


async def measure(url: str, browser, runs: int) -> list[float]:
    page = await browser.new_page()
    await page.goto(url + "/")
    out = []
    for _ in range(runs):
        out.append(await page.evaluate(CONNECT))
        await page.wait_for_timeout(500)
    await page.close()
    return out


async def main() -> None:
    from playwright.async_api import async_playwright

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    report = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
            "--autoplay-policy=no-user-gesture-required", "--disable-features=WebRtcHideLocalIpsWithMdns"])
        for name, factory in (("baseline_aiortc", BaselineProcess), ("avatar", ServerProcess)):
            with factory() as proc:
                runs = await measure(proc.url, browser, args.runs)
            report[name] = {"connect_to_first_frame_ms_median": round(statistics.median(runs), 1),
                            "all_ms": [round(r, 1) for r in runs]}
        await browser.close()
    report["ratio_avatar_to_baseline"] = round(
        report["avatar"]["connect_to_first_frame_ms_median"]
        / report["baseline_aiortc"]["connect_to_first_frame_ms_median"], 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
