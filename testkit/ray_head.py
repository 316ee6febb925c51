"""A one-node Ray cluster on loopback for tests and benches, stopped without touching any other.

`ray stop` stops every Ray process of the machine: a developer's own cluster too. Here the
head runs with a temporary folder of its own as TMPDIR; its daemons inherit that variable,
and the processes they start (agents, workers) descend from them, so exactly those are
stopped: SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testkit.server import free_port

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


class RayHead:
    """`with RayHead(cpus) as head:` a head node on 127.0.0.1; `head.address`, and
    `head.temp_dir`, the node's temporary folder (where its actors keep what they are sent)."""

    def __init__(self, cpus: int | None = None):
        self.cpus = cpus
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # short: Ray's socket paths under it must stay under 108 bytes
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ray-node-"))

    def __enter__(self) -> RayHead:
        cpus = [] if self.cpus is None else [f"--num-cpus={self.cpus}"]
        try:
            subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}", *cpus,
                            "--include-dashboard=false", "--disable-usage-stats"], check=True,
                           env={**ENV, "TMPDIR": str(self.temp_dir)}, capture_output=True, timeout=120)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self, grace_s: float = 10.0, kill_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `grace_s`, to every process of this cluster, found
        again each round: a daemon may start a child while the others stop (one such was
        left running after a single look)."""
        started, termed = time.monotonic(), set[int]()
        while pids := {pid for pid in cluster_processes(self.temp_dir) if alive(pid)}:
            waited = time.monotonic() - started
            if waited > grace_s + kill_s:
                break
            if waited < grace_s:
                signal_all(pids - termed, signal.SIGTERM)
                termed |= pids
            else:
                signal_all(pids, signal.SIGKILL)
            time.sleep(0.2)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def cluster_processes(temp_dir: Path) -> set[int]:
    """The processes that carry TMPDIR=temp_dir, and all their descendants."""
    marker = f"TMPDIR={temp_dir}".encode()
    parent: dict[int, int] = {}
    ours: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                ours.add(int(entry.name))
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue
    while True:
        children = {pid for pid, ppid in parent.items() if ppid in ours} - ours
        if not children:
            return ours
        ours |= children


def signal_all(pids: set[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def alive(pid: int) -> bool:
    """Running (a zombie has exited: only its parent's wait is left)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
