"""Load: add sessions one at a time until any drops below 24 fps; how many this machine holds.

The avatar always sends 25 fps (a late engine repeats its last picture), so the criterion
is the rate of newly rendered frames per session (`fresh_fps` of the stats events) and
the fps received. Each session has its own real aiortc viewer on this same machine, so
the viewers' own decoding competes for the CPU too: the figure is a floor. The bare aiortc
server under the same viewers is the baseline (received fps only). Prints JSON.

    .venv/bin/python bench/load.py [--max 6] [--seconds 8] [--workers N] [--ray]

With --ray the avatar server runs a second time with AVATAR_ENGINE=ray against a Ray
cluster this script starts on loopback (`ray start --head`, as many CPUs as this
machine), with as many engine workers as the local run: the same cores. It also
reports the bytes that reach the front end from the workers' nodes per session and
second (encoded frames: what would cross the network between machines).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.light_viewer import LightViewer  # noqa: E402
from bench.session import BaselineProcess  # noqa: E402
from testkit.ray_head import RayHead  # noqa: E402
from testkit.server import ServerProcess  # noqa: E402

FLOOR_FPS = 24.0


async def engine_bytes(url: str) -> int:
    """Bytes the front end has received from Ray workers (0 for the local engine)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/healthz") as res:
            return sum(w.get("bytes_received", 0) for w in (await res.json()).get("workers", []))


async def ramp(url: str, most: int, seconds: float, speak: bool) -> dict:
    viewers: list[LightViewer] = []
    levels, held = [], 0
    try:
        for n in range(1, most + 1):
            viewer = LightViewer(url)
            await viewer.connect()
            await viewer.wait_frames(10, timeout=30)
            if speak:
                await viewer.watch_stats()
            viewers.append(viewer)
            if speak:
                for v in viewers:
                    await v.post("speak", {"text": "Load test speech keeps every mouth moving for a while."})
            await asyncio.sleep(2.0)
            counts, received = [v.video_count for v in viewers], await engine_bytes(url) if speak else 0
            await asyncio.sleep(seconds)
            fps = [round((v.video_count - c) / seconds, 2) for v, c in zip(viewers, counts)]
            level = {"sessions": n, "fps_min": min(fps), "fps_each": fps}
            if received:
                level["engine_bytes_per_session_s"] = round((await engine_bytes(url) - received) / seconds / n)
            if speak:
                level["fresh_fps_each"] = [v.fresh_fps for v in viewers]
                level["fresh_fps_min"] = min(level["fresh_fps_each"])
            levels.append(level)
            if min(fps) < FLOOR_FPS or level.get("fresh_fps_min", FLOOR_FPS) < FLOOR_FPS:
                break
            held = n
    finally:
        for v in viewers:
            await v.close()
    return {"sessions_held_at_24fps": held, "levels": levels}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--avatar", type=Path, help="prepared avatar file (a .png with its landmarks, or a "
                        ".clip.npz) for the default avatar; bench/video_avatar.py prints one")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="engine workers (both engines)")
    parser.add_argument("--ray", action="store_true", help="also run the avatar on a local Ray cluster")
    args = parser.parse_args()
    report = {}
    env = {"AVATAR_MAX_SESSIONS": "64", "AVATAR_WORKERS": str(args.workers),
           **({"AVATAR_AVATAR": str(args.avatar)} if args.avatar else {})}
    runs = [("avatar", lambda: ServerProcess(env=env), True), ("baseline_aiortc", BaselineProcess, False)]
    with ray_head() if args.ray else contextlib.nullcontext() as address:
        if address:
            ray_env = {**env, "AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": address}
            runs.insert(1, ("avatar_on_ray", lambda: ServerProcess(env=ray_env), True))
        for name, factory, speak in runs:
            with factory() as proc:
                report[name] = await ramp(proc.url, args.max, args.seconds, speak)
    print(json.dumps(report, indent=2))


@contextlib.contextmanager
def ray_head() -> Iterator[str]:
    """A one-node Ray cluster on loopback with this machine's CPUs; its address."""
    with RayHead() as head:
        yield head.address


if __name__ == "__main__":
    asyncio.run(main())
