"""The project as a user installs it: the wheel built from the tracked files, installed into a
fresh environment outside the checkout, and the JS client packed by npm."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import numpy as np

from avatar_client import AvatarViewer
from testkit.server import ROOT

PIP = (sys.executable, "-m", "pip")


def source_copy(dest: Path) -> Path:
    """The files git tracks (and new ones it does not ignore), copied: a build in the checkout
    itself would reuse its build/ folder, where files deleted from the source live on."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def build_wheel(work: Path) -> Path:
    """The wheel `pip wheel .` makes, built offline with this environment's setuptools."""
    source = source_copy(work / "source")
    subprocess.run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work / "dist"),
                    str(source)], check=True, capture_output=True)
    (wheel,) = (work / "dist").glob("avatar_server-*.whl")
    return wheel


def fresh_environment(wheel: Path, target: Path) -> Path:
    """A new virtual environment holding the wheel, and nothing of the checkout; its
    dependencies are this environment's installed packages, reached through a .pth line
    (lines in a .pth only extend the path: the editable install's finder beside them is
    never run, so `engine` and `server` can only come from the wheel). Returns its bin/."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(target)}))
    (site / "_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([*PIP, "--python", str(target / "bin" / "python"), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True)
    return target / "bin"


def pack_client(dest: Path) -> Path:
    """`npm pack` of the JS client (web/); returns the unpacked tarball's package/ folder."""
    out = subprocess.run(["npm", "pack", "--json", "--pack-destination", str(dest)], cwd=ROOT / "web",
                         capture_output=True, text=True, check=True).stdout
    tarball = dest / json.loads(out)[0]["filename"]
    with tarfile.open(tarball) as tar:
        tar.extractall(dest / "unpacked", filter="data")
    return dest / "unpacked" / "package"


async def plays_and_speaks(url: str, text: str, avatar: str = "default") -> None:
    """What a user of an installed server sees: a real aiortc viewer given 24+ frames a second,
    and a sentence that reaches it as speech."""
    viewer = AvatarViewer(url, avatar=avatar)
    try:
        await viewer.connect()
        await viewer.record_events()
        await viewer.wait_frames(25, timeout=60)
        assert await viewer.sent_fps() >= 24
        assert (await viewer.post("speak", {"text": text}))[0] == 202
        await viewer.wait_event("speak_ended", 30)
        heard = np.concatenate([pcm for _, pcm in viewer.received.audio])
        assert np.abs(heard.astype(np.int32)).max() > 1000, "no speech reached the viewer"
    finally:
        await viewer.close()
