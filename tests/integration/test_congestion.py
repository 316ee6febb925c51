"""Congestion control over a real narrow link: the server runs in a network namespace of
its own, joined to this one by a veth pair whose server side is limited and made lossy:
`tc netem` where the kernel has it, else `tc tbf` for the rate and an iptables rule
that drops 1 % of packets at random. The viewer's bandwidth estimate (REMB) and the loss
in its receiver reports must bring the video bitrate down while the link is narrow and back
up when it is lifted, with frames flowing all along (the viewer gives up on a packet that
never comes, avatar_client/jitter.py)."""

import asyncio
import os
import shutil
import subprocess
import time

import pytest

from avatar_client import AvatarViewer
from tests.conftest import ServerProcess

pytestmark = pytest.mark.integration
NS = f"avcc{os.getpid() % 100000}"
HOST_IF, NS_IF = f"vh{NS}", f"vn{NS}"
HOST_IP, NS_IP = "198.18.7.1", "198.18.7.2"  # 198.18.0.0/15: reserved for network tests
NETEM = "netem rate 400kbit delay 20ms loss 1%"
TBF = "tbf rate 400kbit burst 16kb latency 200ms"
DROP = ("OUTPUT", "-o", NS_IF, "-m", "statistic", "--mode", "random", "--probability", "0.01", "-j", "DROP")


def sh(*cmd: str, ns: bool = False) -> None:
    subprocess.run([*(("ip", "netns", "exec", NS) if ns else ()), *cmd], check=True, capture_output=True)


@pytest.fixture(scope="module")
def link():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        pytest.skip("needs root with iproute2 (ip, tc) to make a network namespace and shape its link")
    try:
        sh("ip", "netns", "add", NS)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot make a network namespace here: {exc.stderr.decode().strip()}")
    try:
        sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
        sh("ip", "link", "set", NS_IF, "netns", NS)
        sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", HOST_IF)
        sh("ip", "link", "set", HOST_IF, "up")
        sh("ip", "addr", "add", f"{NS_IP}/24", "dev", NS_IF, ns=True)
        sh("ip", "link", "set", NS_IF, "up", ns=True)
        sh("ip", "link", "set", "lo", "up", ns=True)
        yield
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)  # takes the veth pair with it


def narrow_the_link() -> None:
    try:
        sh("tc", "qdisc", "add", "dev", NS_IF, "root", *NETEM.split(), ns=True)
    except subprocess.CalledProcessError:  # no sch_netem in this kernel
        sh("tc", "qdisc", "add", "dev", NS_IF, "root", *TBF.split(), ns=True)
        sh("iptables", "-A", *DROP, ns=True)


def widen_the_link() -> None:
    sh("tc", "qdisc", "del", "dev", NS_IF, "root", ns=True)
    subprocess.run(["ip", "netns", "exec", NS, "iptables", "-D", *DROP], capture_output=True)


def kbps_between(events: list[dict], t0: float, t1: float) -> list[float]:
    return [e["video_kbps"] for e in events if e["type"] == "stats" and t0 <= e["t"] <= t1]


@pytest.fixture(scope="module")
def narrowed(link) -> dict:
    """One session through a wide, then narrow, then wide again link: what was measured."""
    return asyncio.run(_narrow_and_widen())


async def _narrow_and_widen() -> dict:
    with ServerProcess(host=NS_IP, prefix=("ip", "netns", "exec", NS)) as server:
        viewer = AvatarViewer(server.url)
        await viewer.connect()
        events = await viewer.record_events()
        try:
            await viewer.wait_frames(25, timeout=20)
            await viewer.post("speak", {"text": "I keep talking while the network changes under me. " * 8})
            await asyncio.sleep(6)
            wide = kbps_between(events, time.time() - 3, time.time())
            narrow_the_link()
            limited_at = time.time()
            await asyncio.sleep(9)
            frames_before = viewer.video_count
            await asyncio.sleep(6)
            narrow = kbps_between(events, limited_at + 8, time.time())
            limited_fps = (viewer.video_count - frames_before) / 6  # once the bitrate has settled
            widen_the_link()
            lifted_at = time.time()
            await viewer.post("speak", {"text": "Now the link is wide again and I go on talking. " * 8})
            await asyncio.sleep(20)
            recovered = kbps_between(events, lifted_at + 12, time.time())
        finally:
            await viewer.close()
    measured = {"wide_kbps": wide, "narrow_kbps": narrow, "limited_fps": round(limited_fps, 1),
                "recovered_kbps": recovered}
    print(measured)
    return measured


def test_bitrate_falls_below_a_narrow_lossy_link(narrowed):
    assert min(narrowed["wide_kbps"]) > 600, narrowed
    assert max(narrowed["narrow_kbps"]) < 420, f"the bitrate did not follow the 400 kbit/s link: {narrowed}"


def test_frames_flow_on_the_narrow_link_and_the_bitrate_recovers(narrowed):
    assert narrowed["limited_fps"] > 10, f"frames stopped flowing on the narrow link: {narrowed}"
    assert max(narrowed["recovered_kbps"]) > 600, f"the bitrate did not recover: {narrowed}"
