"""What one RTMP broadcast costs: the server's CPU (the process, its engine workers and the
publisher process) with a speaking session, then the same session broadcast to Debian's
nginx-rtmp on loopback, beside a second session measured in the same run. Prints JSON;
`AVATAR_MAX_BROADCASTS` (one per core) rests on the ratio.

    .venv/bin/python bench/broadcast.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.viewers import cpu_percent, one_and_two_sessions, speaking  # noqa: E402
from testkit.rtmp import NginxRtmp  # noqa: E402
from testkit.server import ServerProcess  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with NginxRtmp() as ingest, ServerProcess(env={"AVATAR_BROADCAST_TARGETS": "127.0.0.1"}) as server:
        first, one_session, two_sessions = await one_and_two_sessions(server, args.seconds)
        events = await first.record_events()
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{server.url}/v1/sessions/{first.session_id}/broadcast",
                                 json={"url": ingest.url("bench")}) as res:
                assert res.status == 202, await res.text()
        await first.wait_event("broadcast_started", 20)
        await speaking([first])
        broadcasting = await cpu_percent(server.proc.pid, args.seconds)
        stats = [e for e in events if e["type"] == "stats"][-int(args.seconds):]
        await first.close()
    print(json.dumps({
        "server_cpu_percent_one_session": one_session,
        "server_cpu_percent_one_session_broadcast": broadcasting,
        "server_cpu_percent_per_broadcast": round(broadcasting - one_session, 1),
        "baseline_server_cpu_percent_per_added_session": round(two_sessions - one_session, 1),
        "session_fps_while_broadcasting_min": min(e["fps"] for e in stats),
    }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
