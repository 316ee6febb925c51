"""A real avatar-server process on a free loopback port, as tests and benchmarks start it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
ARTIFACTS = ROOT / "artifacts"  # logs and screenshots a failing run leaves behind
ARTIFACTS.mkdir(exist_ok=True)
LOG_TAIL = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def end(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `grace_s`; reaped either way."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ServerProcess:
    """`python -m server` as a user runs it, with its log kept for failures."""

    _store: tempfile.TemporaryDirectory | None = None  # its avatar store, when it got one of its own

    def __init__(self, env: dict[str, str] | None = None, host: str = "127.0.0.1", prefix: tuple[str, ...] = (),
                 command: tuple[str, ...] = (sys.executable, "-m", "server"), cwd: Path = ROOT):
        """`prefix`: a command to run the server under (e.g. `ip netns exec NAME`); `command`
        and `cwd`: how and where it starts (an installed `avatar-server`, outside the checkout)."""
        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        self.log = open(ARTIFACTS / f"server-{self.port}.log", "w")
        env = {**os.environ, **(env or {})}
        # Its own avatar store unless the caller names one: the default is the user's
        # ~/.cache, where every run's uploads would pile up to max_avatars (seen: the third
        # suite on one machine was refused too_many_avatars).
        self._store = None if "AVATAR_AVATARS_DIR" in env else tempfile.TemporaryDirectory(prefix="avatar-store-")
        if self._store is not None:
            env["AVATAR_AVATARS_DIR"] = self._store.name
        self.avatars_dir = Path(env["AVATAR_AVATARS_DIR"])
        self.proc = subprocess.Popen(
            [*prefix, *command, "--host", host, "--port", str(self.port)],
            cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as res:
                    if json.load(res)["status"] == "ok":
                        return
            except OSError:
                time.sleep(0.3)
        raise TimeoutError("server did not become ready")

    def __enter__(self) -> ServerProcess:
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind, *exc) -> None:
        self.stop()
        if kind is not None:  # a failing test shows what the server said (CI keeps no artifacts)
            lines = Path(self.log.name).read_text(errors="replace").splitlines()
            print(f"--- the last {LOG_TAIL} lines of {self.log.name} ---", *lines[-LOG_TAIL:], sep="\n")

    def stop(self) -> None:
        end(self.proc, 20)
        self.log.close()
        if self._store is not None:
            self._store.cleanup()
