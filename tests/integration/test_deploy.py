"""The deployment files: the compose file validates, and TURN reaches the server's ICE configuration."""

import shutil
import subprocess

import pytest

from testkit.server import ROOT

pytestmark = pytest.mark.integration


def test_compose_file_validates_with_turn_wired_in():
    compose = shutil.which("docker-compose")
    assert compose, "Debian's docker-compose is installed by scripts/setup.sh"
    env = {"PATH": "/usr/bin:/bin", "TURN_HOST": "203.0.113.10", "TURN_SECRET": "pw"}
    out = subprocess.run([compose, "-f", str(ROOT / "docker-compose.yml"), "config"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "turn:203.0.113.10:3478?transport=udp" in out and "coturn/coturn" in out
    assert "--user=avatar:pw" in out
    gpu = subprocess.run([compose, "-f", str(ROOT / "docker-compose.yml"), "--profile", "gpu", "config"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert "nvidia" in gpu and "capabilities" in gpu
    assert "TORCH_INDEX: https://pypi.org/simple" in gpu and "avatar-server-gpu:latest" in gpu, "a CUDA torch build"
    ray = subprocess.run([compose, "-f", str(ROOT / "docker-compose.yml"), "--profile", "ray", "config"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert "AVATAR_ENGINE: ray" in ray and "AVATAR_RAY_ADDRESS: ray-head:6379" in ray and "--block" in ray
    assert "turn:203.0.113.10:3478?transport=udp" in ray.split("avatar-ray:")[1], "the Ray front end gets TURN too"


async def test_ice_servers_are_offered_to_browsers(server):
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(server.url + "/v1/ice") as res:
            assert res.status == 200 and (await res.json()) == {"iceServers": []}  # none by default
