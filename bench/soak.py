"""Soak: one session for N minutes (default 10), speaking every 10 s. Prints JSON.

RSS slope of the server and its workers after warm-up (MB/min; also per process: server,
piper, engine), the largest gap between
video frames at a real aiortc client, fps, and the drift of the A/V offset measured at the
client (each stream's arrival time minus its media time; their difference should not move).
The same figures for the bare aiortc server over a shorter run are the baseline.

    .venv/bin/python bench/soak.py [--minutes 10] [--baseline-minutes 2] [--ray]

With --ray the avatar's engine runs on a Ray cluster this script starts on loopback
(bench/load.py's); its actors are not the server's children, so they are found by the
pids /healthz lists and counted as "engine".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

import aiohttp
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.light_viewer import LightViewer  # noqa: E402
from bench.load import ray_head  # noqa: E402
from bench.session import BaselineProcess  # noqa: E402
from testkit.server import ServerProcess  # noqa: E402

SENTENCES = ["The quick brown fox jumps over the lazy dog, again and again.",
             "Long sessions must not grow; memory stays flat by construction.",
             "Every ten seconds I say something new, so the test keeps me busy."]
WARM_UP_S = 120.0


def tree_rss_mb(pid: int, workers: list[int]) -> dict[str, float]:
    """RSS (MB) of the server's process tree and its engine workers (`workers`: pids; Ray
    actors are not its children), in all and per kind: the server itself, piper (the TTS
    process) and the rest (engine workers, helpers)."""
    root = psutil.Process(pid)
    tree = [root, *root.children(recursive=True)]
    out = {"all": 0.0, "server": 0.0, "piper": 0.0, "engine": 0.0}
    for p in tree + [psutil.Process(w) for w in set(workers) - {p.pid for p in tree} if psutil.pid_exists(w)]:
        try:
            rss, cmdline = p.memory_info().rss / 2**20, " ".join(p.cmdline())
        except psutil.NoSuchProcess:  # a child that has just ended (a recycled piper)
            continue
        kind = "server" if p.pid == pid else "piper" if "-m piper" in cmdline else "engine"
        out[kind] += rss
        out["all"] += rss
    return out


def slope_per_min(samples: list[tuple[float, dict]], skip_s: float, kind: str = "all") -> float:
    pts = [(t, v[kind]) for t, v in samples if t >= skip_s]
    if len(pts) < 3:
        return float("nan")
    t, v = np.array(pts).T
    return float(np.polyfit(t / 60.0, v, 1)[0])


def av_offsets(viewer: LightViewer, window_s: float = 30.0) -> list[float]:
    """Per window: median(video arrival - media time) - median(audio arrival - media time), ms."""
    video = np.array(viewer.video_times)
    audio = np.array(viewer.audio_times)
    if len(video) == 0 or len(audio) == 0:
        return []
    start, end = video[0, 0], video[-1, 0]
    out = []
    for lo in np.arange(start, end - window_s + 1e-6, window_s):
        v = video[(video[:, 0] >= lo) & (video[:, 0] < lo + window_s)]
        a = audio[(audio[:, 0] >= lo) & (audio[:, 0] < lo + window_s)]
        if len(v) and len(a):
            out.append(1000 * (np.median(v[:, 0] - v[:, 1]) - np.median(a[:, 0] - a[:, 1])))
    return out


async def soak(proc, minutes: float, speak: bool) -> dict:
    viewer = LightViewer(proc.url)
    await viewer.connect()
    await viewer.wait_frames(25)
    async with aiohttp.ClientSession() as http:
        async with http.get(proc.url + "/healthz") as res:
            workers = [w["pid"] for w in (await res.json()).get("workers", []) if "pid" in w]
    t0, samples, next_speak, i = time.monotonic(), [], 0.0, 0
    while (elapsed := time.monotonic() - t0) < minutes * 60:
        if speak and elapsed >= next_speak:
            await viewer.post("speak", {"text": SENTENCES[i % len(SENTENCES)]})
            i, next_speak = i + 1, next_speak + 10.0
        samples.append((elapsed, tree_rss_mb(proc.proc.pid, workers)))
        await asyncio.sleep(5.0)
    arrivals = np.array([t for t, _ in viewer.video_times])
    gaps = np.diff(arrivals) * 1000
    offsets = av_offsets(viewer)
    warm = [o for k, o in enumerate(offsets) if (k + 1) * 30 > WARM_UP_S] or offsets
    warm_s = min(WARM_UP_S, minutes * 30)
    await viewer.close()
    return {
        "minutes": minutes,
        "rss_mb_start": round(samples[0][1]["all"], 1), "rss_mb_end": round(samples[-1][1]["all"], 1),
        "rss_slope_mb_per_min_after_warmup": round(slope_per_min(samples, warm_s), 3),
        "rss_mb_end_by_process": {k: round(v, 1) for k, v in samples[-1][1].items() if k != "all"},
        "rss_slope_by_process": {k: round(slope_per_min(samples, warm_s, k), 3) for k in ("server", "piper", "engine")},
        "max_frame_gap_ms": round(float(gaps.max()), 1), "frame_gaps_over_250ms": int((gaps > 250).sum()),
        "fps": round(len(arrivals) / (arrivals[-1] - arrivals[0]), 2),
        "av_offset_ms_first_last": [round(warm[0], 1), round(warm[-1], 1)] if warm else None,
        "av_offset_drift_ms": round(warm[-1] - warm[0], 1) if warm else None,
        "av_offset_range_ms": round(max(warm) - min(warm), 1) if warm else None,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--baseline-minutes", type=float, default=2.0)
    parser.add_argument("--avatar", type=Path, help="prepared avatar file (a .png with its landmarks, or a "
                        ".clip.npz) for the default avatar; bench/video_avatar.py prints one")
    parser.add_argument("--ray", action="store_true", help="the avatar's engine on a local Ray cluster")
    args = parser.parse_args()
    report = {}
    avatar_env = {"AVATAR_AVATAR": str(args.avatar)} if args.avatar else {}
    with ray_head() if args.ray else contextlib.nullcontext() as address:
        if address:
            avatar_env |= {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": address}
        runs = (("avatar_on_ray" if address else "avatar", lambda: ServerProcess(env=avatar_env), args.minutes, True),
                ("baseline_aiortc", BaselineProcess, args.baseline_minutes, False))
        for name, factory, minutes, speak in runs:
            with factory() as proc:
                report[name] = await soak(proc, minutes, speak)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
