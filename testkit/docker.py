"""A private Docker daemon for one test run: its own data, exec root and socket (overlay2
storage, no iptables, no bridge: containers use the host's network), stopped and removed after.
vfs works too, but copies the whole file system for every layer: minutes per step here."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from testkit.server import end


def why_not() -> str | None:
    """Why no daemon can be started here, or None."""
    if os.geteuid() != 0:
        return "dockerd needs root"
    missing = [tool for tool in ("dockerd", "docker", "containerd", "runc") if not shutil.which(tool)]
    return f"not installed: {', '.join(missing)}" if missing else None


class DockerDaemon:
    def __init__(self, root: Path):
        self.root = root
        self.socket = root / "docker.sock"
        (root / "data").mkdir(parents=True)
        self.log = open(root / "dockerd.log", "w")
        self.proc = subprocess.Popen(
            ["dockerd", "--storage-driver", "overlay2", "--iptables=false", "--ip6tables=false", "--bridge=none",
             "--data-root", str(root / "data"), "--exec-root", str(root / "exec"), "--pidfile", str(root / "pid"),
             "--host", f"unix://{self.socket}", "--containerd-namespace", f"avatar-test-{os.getpid()}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def __enter__(self) -> DockerDaemon:
        deadline = time.monotonic() + 60
        while self.run("info", check=False).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"dockerd did not start; see {self.log.name}")
            time.sleep(0.5)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def run(self, *args: str, check: bool = True, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "--host", f"unix://{self.socket}", *args], capture_output=True, text=True,
                              check=check, timeout=timeout, **kwargs)

    def stop(self) -> None:
        if self.proc.poll() is None:
            for container in self.run("ps", "-aq", check=False).stdout.split():
                self.run("rm", "-f", container, check=False)
        end(self.proc, 30)
        self.log.close()
        # What dockerd leaves mounted under its folders (its network namespace, overlays).
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for point in sorted((m for m in mounts if m.startswith(str(self.root) + "/")), reverse=True):
            subprocess.run(["umount", "-l", point], check=False)
        shutil.rmtree(self.root / "data", ignore_errors=True)
        shutil.rmtree(self.root / "exec", ignore_errors=True)
