"""Debian's nginx with its RTMP module, on loopback: an ingest for broadcast tests and benches."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .server import end, free_port

MODULE = Path("/usr/lib/nginx/modules/ngx_rtmp_module.so")
CONFIG = """load_module {module};
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
rtmp {{ server {{ listen 127.0.0.1:{port}; application live {{ live on; record off; }} }} }}
"""


class NginxRtmp:
    """`with NginxRtmp() as ingest:` publish to `ingest.url(key)`, read it back from the same URL."""

    def __init__(self, port: int | None = None):
        assert MODULE.exists() and shutil.which("nginx"), "libnginx-mod-rtmp is missing: the test command installs it"
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="nginx-rtmp-"))
        self.proc: subprocess.Popen | None = None

    def url(self, key: str = "test") -> str:
        return f"rtmp://127.0.0.1:{self.port}/live/{key}"

    def start(self) -> None:
        conf = self.dir / "nginx.conf"
        conf.write_text(CONFIG.format(module=MODULE, dir=self.dir, port=self.port))
        self.proc = subprocess.Popen(["nginx", "-e", str(self.dir / "stderr.log"), "-p", str(self.dir),
                                      "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"nginx-rtmp did not listen on {self.port}: {(self.dir / 'error.log').read_text()}")

    def stop(self) -> None:
        if self.proc:
            end(self.proc, 10)
            self.proc = None

    def __enter__(self) -> NginxRtmp:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
