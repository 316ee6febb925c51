"""A narrow, lossy link for congestion tests: a network namespace of its own for the server,
joined to this one by a veth pair whose server side is shaped: `tc netem` where the
kernel has it, else `tc tbf` for the rate and an iptables rule that drops 1 % of packets
at random. Needs root with iproute2."""

from __future__ import annotations

import os
import shutil
import subprocess

NS = f"avcc{os.getpid() % 100000}"
HOST_IF, NS_IF = f"vh{NS}", f"vn{NS}"
HOST_IP, NS_IP = "198.18.7.1", "198.18.7.2"  # 198.18.0.0/15: reserved for network tests
NETEM = "netem rate 400kbit delay 20ms loss 1%"
TBF = "tbf rate 400kbit burst 16kb latency 200ms"
DROP = ("OUTPUT", "-o", NS_IF, "-m", "statistic", "--mode", "random", "--probability", "0.01", "-j", "DROP")


def sh(*cmd: str, ns: bool = False) -> None:
    subprocess.run([*(("ip", "netns", "exec", NS) if ns else ()), *cmd], check=True, capture_output=True)


def narrow_the_link() -> None:
    try:
        sh("tc", "qdisc", "add", "dev", NS_IF, "root", *NETEM.split(), ns=True)
    except subprocess.CalledProcessError:  # no sch_netem in this kernel
        sh("tc", "qdisc", "add", "dev", NS_IF, "root", *TBF.split(), ns=True)
        sh("iptables", "-A", *DROP, ns=True)


def widen_the_link() -> None:
    sh("tc", "qdisc", "del", "dev", NS_IF, "root", ns=True)
    subprocess.run(["ip", "netns", "exec", NS, "iptables", "-D", *DROP], capture_output=True)


def can_shape() -> str | None:
    """Why no shaped link can be made here, or None."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return "needs root with iproute2 (ip, tc) to make a network namespace and shape its link"
    return None


def real_root() -> bool:
    """Root of this machine, not only of a user namespace (where `ip netns add` may be refused)."""
    try:
        with open("/proc/self/uid_map") as f:
            return os.geteuid() == 0 and f.read().split()[:3] == ["0", "0", "4294967295"]
    except OSError:
        return False


def connect() -> None:
    """The veth pair into the namespace (made by `ip netns add NS`), up, not yet shaped."""
    sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
    sh("ip", "link", "set", NS_IF, "netns", NS)
    sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", HOST_IF)
    sh("ip", "link", "set", HOST_IF, "up")
    sh("ip", "addr", "add", f"{NS_IP}/24", "dev", NS_IF, ns=True)
    sh("ip", "link", "set", NS_IF, "up", ns=True)
    sh("ip", "link", "set", "lo", "up", ns=True)


def remove() -> None:
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)  # takes the veth pair with it
