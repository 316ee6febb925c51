"""The server's helper process that prepares one uploaded clip into a video avatar.

It runs apart from the server so that a hostile or huge clip costs a process with its own
limits, never the event loop or another session.
"""

from __future__ import annotations

from pathlib import Path

from engine.assembly import model_motion
from engine.families.video.clip import ClipError
from engine.families.video.prepare import prepare_clip, quick_check

CPU_LIMIT_S = 1200  # the helper's CPU time: a 5-minute 1080p clip takes about a third of it
MEMORY_LIMIT = 6 << 30  # its address space (the mesh's runtime maps about 1.5 GB)


def main(argv: list[str] | None = None) -> None:
    """`python -m engine.runtime.prepare CLIP --folder F`: the server's helper process.

    One JSON object per line on stdout: {"checked": true} once quick_check has passed, then
    {"progress", "stage"} as it goes, then {"avatar_id"}; or {"error", "reason"} and exit 2.
    """
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("clip", type=Path)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--id", help="the prepared avatar's id (default: a digest of the clip)")
    args = parser.parse_args(argv)
    limit_resources()

    def say(**message: object) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    try:
        quick_check(args.clip)
        say(checked=True)
        avatar_id = prepare_clip(args.clip, args.folder, model_motion, args.size,
                                 lambda share, stage: say(progress=round(share, 3), stage=stage), args.id)
    except ClipError as exc:
        say(error=exc.code, reason=str(exc))
        raise SystemExit(2) from None
    say(avatar_id=avatar_id)


def limit_resources() -> None:
    """Bound what one clip can cost, whatever it holds: past the CPU limit the kernel ends
    the helper (the server reports the preparation failed); past the memory one, allocations fail."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S + 5))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


if __name__ == "__main__":
    main()
