"""Benchmark one live session against a bare aiortc server, in the same run.

Prints JSON: time to first frame (offer -> first decoded frame at a real aiortc
client, median of several sessions), sustained fps at the client while the avatar
speaks, and CPU of the server process (and, for the avatar, of its engine worker
and TTS process), each beside the baseline's figure.

    .venv/bin/python bench/session.py [--sessions 5] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from avatar_client import AvatarViewer  # noqa: E402
from testkit.server import ARTIFACTS, ServerProcess, free_port  # noqa: E402

TEXT = ("Good morning, and thank you for joining. Today I will walk you through the plan for the "
        "coming weeks. We start with the basics, then move on to the details. ") * 3


class BaselineProcess(ServerProcess):
    def __init__(self) -> None:  # noqa: D107 - same lifecycle, other program
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(ARTIFACTS / f"baseline-{self.port}.log", "w")
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "baseline_server.py"),
                                      "--port", str(self.port)], cwd=ROOT, stdout=self.log,
                                     stderr=subprocess.STDOUT)


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


async def ttff(url: str, sessions: int) -> list[float]:
    out = []
    for _ in range(sessions):
        viewer = AvatarViewer(url)
        await viewer.connect()
        await viewer.wait_frames(1)
        out.append(viewer.ttff_ms)
        await viewer.close()
        await asyncio.sleep(0.5)
    return out


async def speaking(url: str, pid: int, seconds: float) -> dict:
    server = psutil.Process(pid)
    viewer = AvatarViewer(url, keep_frames=10)
    await viewer.connect()
    await viewer.wait_frames(25)
    await viewer.post("speak", {"text": TEXT})
    await asyncio.sleep(1.0)  # into the speech
    procs = {"server": server, **{_label(c): c for c in server.children(recursive=True)}}
    before = {k: cpu_seconds(p) for k, p in procs.items()}
    frames0, t0 = viewer.video_count, time.monotonic()
    arrivals = []
    while time.monotonic() - t0 < seconds:
        await asyncio.sleep(0.01)
        arrivals.append((time.monotonic(), viewer.video_count))
    wall = time.monotonic() - t0
    fps = (viewer.video_count - frames0) / wall
    cpu = {k: round(100 * (cpu_seconds(p) - before[k]) / wall, 1) for k, p in procs.items()}
    gaps = _max_gap_ms(arrivals)
    await viewer.close()
    return {"fps": round(fps, 2), "max_frame_gap_ms": gaps, "cpu_percent_of_one_core": cpu}


def _label(proc: psutil.Process) -> str:
    cmd = " ".join(proc.cmdline())
    kinds = (("piper", "tts_piper"), ("resource_tracker", "resource_tracker"), ("multiprocessing", "engine_worker"))
    kind = next((k for marker, k in kinds if marker in cmd), proc.name())
    return f"{kind}:{proc.pid}"


def _max_gap_ms(arrivals: list[tuple[float, int]]) -> float:
    changes = [t for (t, n), (_, m) in zip(arrivals[1:], arrivals[:-1]) if n != m]
    return round(1000 * max(np.diff(changes)), 1) if len(changes) > 1 else float("nan")


async def measure(proc: ServerProcess, sessions: int, seconds: float) -> dict:
    firsts = await ttff(proc.url, sessions)
    result = await speaking(proc.url, proc.proc.pid, seconds)
    result["ttff_ms_median"] = round(statistics.median(firsts), 1)
    result["ttff_ms_all"] = [round(x, 1) for x in firsts]
    return result


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--avatar", type=Path, help="prepared avatar file (a .png with its landmarks, or a "
                        ".clip.npz) for the default avatar; bench/video_avatar.py prints one")
    args = parser.parse_args()
    report = {}
    avatar_env = {"AVATAR_AVATAR": str(args.avatar)} if args.avatar else {}
    for name, factory in (("baseline_aiortc", BaselineProcess), ("avatar", lambda: ServerProcess(env=avatar_env))):
        with factory() as proc:
            report[name] = await measure(proc, args.sessions, args.seconds)
    a, b = report["avatar"], report["baseline_aiortc"]
    report["avatar"]["server_cpu_percent"] = a["cpu_percent_of_one_core"]["server"]
    report["ratio_avatar_to_baseline"] = {
        "ttff": round(a["ttff_ms_median"] / b["ttff_ms_median"], 2),
        "fps": round(a["fps"] / b["fps"], 3),
        "server_cpu": round(a["cpu_percent_of_one_core"]["server"]
                            / max(b["cpu_percent_of_one_core"]["server"], 0.1), 2),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
