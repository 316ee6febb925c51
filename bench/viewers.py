"""Many viewers of one session: the server's CPU with 10 added WHEP viewers (one shared H.264
encode), beside what 10 sessions would cost, from a second session measured in the same run.
Prints JSON.

    .venv/bin/python bench/viewers.py [--viewers 10] [--seconds 10]

CPU is the server process and its engine workers together (psutil, over `--seconds`), while
the session speaks. The viewers decode on this same machine: their fps is a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from avatar_client import AvatarViewer  # noqa: E402
from testkit.server import ServerProcess  # noqa: E402
from testkit.whep import WhepViewer  # noqa: E402

SPEECH = "Many people are watching this one session at the same time, and each of them sees it live."


def server_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


async def cpu_percent(pid: int, seconds: float) -> float:
    """Percent of one core used by the server and its children over `seconds`."""
    procs = server_tree(pid)
    before = sum(p.cpu_times().user + p.cpu_times().system for p in procs)
    await asyncio.sleep(seconds)
    after = sum(p.cpu_times().user + p.cpu_times().system for p in procs if p.is_running())
    return round(100 * (after - before) / seconds, 1)


async def speaking(owners: list[AvatarViewer]) -> None:
    for owner in owners:
        await owner.post("speak", {"text": SPEECH})
    await asyncio.sleep(1.0)


async def one_and_two_sessions(server: ServerProcess, seconds: float) -> tuple[AvatarViewer, float, float]:
    """The server's CPU with one speaking session, then with a second one (the baseline of a
    bench's added cost); the first session is left playing."""
    first = AvatarViewer(server.url)
    await first.connect()
    await first.wait_frames(50)
    await speaking([first])
    one_session = await cpu_percent(server.proc.pid, seconds)
    second = AvatarViewer(server.url)
    await second.connect()
    await second.wait_frames(50)
    await speaking([first, second])
    two_sessions = await cpu_percent(server.proc.pid, seconds)
    await second.close()
    await asyncio.sleep(2.0)
    return first, one_session, two_sessions


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--viewers", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with ServerProcess(env={"AVATAR_MAX_SESSIONS": "8"}) as server:
        first, one_session, two_sessions = await one_and_two_sessions(server, args.seconds)

        path = f"/v1/sessions/{first.session_id}/viewers"
        viewers = [WhepViewer(server.url, path, pictures=False) for _ in range(args.viewers)]
        for viewer in viewers:
            await viewer.connect()
        await asyncio.gather(*(v.wait_frames(25, 60) for v in viewers))
        await speaking([first])
        counts = [v.frames for v in viewers]
        with_viewers = await cpu_percent(server.proc.pid, args.seconds)
        fps = [round((v.frames - c) / args.seconds, 2) for v, c in zip(viewers, counts)]
        for viewer in viewers:
            await viewer.close()
        await first.close()
    per_session = two_sessions - one_session
    print(json.dumps({
        "server_cpu_percent_one_session": one_session,
        f"server_cpu_percent_one_session_and_{args.viewers}_viewers": with_viewers,
        "server_cpu_percent_per_added_viewer": round((with_viewers - one_session) / args.viewers, 1),
        "baseline_server_cpu_percent_per_added_session": round(per_session, 1),
        f"baseline_estimate_{args.viewers}_more_sessions_percent": round(one_session + args.viewers * per_session),
        "viewer_fps_min": min(fps), "viewer_fps_each": fps,
    }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
