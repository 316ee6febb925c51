"""Broadcast targets: the operator's list, a strict parser, and addresses checked after resolution.
Names of the public internet cannot be resolved here, so their answers come from a stand-in
resolver; everything else is the policy the server runs."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from server.config import ConfigError, ServerConfig
from server.errors import ApiError
from server.publish import targets
from server.publish.targets import TargetPolicy

pytestmark = pytest.mark.unit
DNS = {"ingest.example.com": ["93.184.216.34"], "a.rtmp.youtube.com": ["142.250.1.1", "2a00:1450::1"],
       "rebind.example.com": ["142.250.1.2", "10.0.0.5"], "inside.example.com": ["192.168.1.10"],
       "localhost": ["127.0.0.1", "::1"]}


@pytest.fixture(autouse=True)
def resolver(monkeypatch):
    async def resolve(host: str, port: int) -> list:
        return [ipaddress.ip_address(a) for a in DNS[host]]

    monkeypatch.setattr(targets, "_resolve", resolve)


def check(entries: tuple[str, ...], url: object) -> targets.Target | tuple[int, str]:
    try:
        return asyncio.run(TargetPolicy(entries).check(url))
    except ApiError as exc:
        return exc.status, exc.code


def test_off_until_listed_and_only_listed_hosts_and_ports():
    assert check((), "rtmp://a.rtmp.youtube.com/live2/key") == (403, "broadcast_disabled")
    listed = ("a.rtmp.youtube.com", "ingest.example.com:1936")
    target = check(listed, "rtmp://a.rtmp.youtube.com/live2/key")
    assert not isinstance(target, tuple) and target.addresses == ("142.250.1.1", "2a00:1450::1")
    assert target.public == "rtmp://a.rtmp.youtube.com:1935/live2" and not target.internal
    assert check(listed, "rtmp://ingest.example.com/live/key") == (403, "target_not_allowed")  # port 1935
    assert not isinstance(check(listed, "rtmp://INGEST.example.com:1936/live/key"), tuple)  # host names: any case
    assert check(listed, "rtmp://other.example.com/live/key") == (403, "target_not_allowed")


def test_a_listed_name_that_resolves_inside_the_network_is_refused_unless_that_address_is_listed():
    assert check(("rebind.example.com",), "https://rebind.example.com/whip") == (403, "target_not_allowed")
    assert check(("inside.example.com",), "https://inside.example.com/whip") == (403, "target_not_allowed")
    allowed = check(("inside.example.com", "192.168.1.10"), "https://inside.example.com/whip")
    assert not isinstance(allowed, tuple) and allowed.internal
    assert not isinstance(check(("localhost",), "rtmp://localhost/live/key"), tuple)
    assert check(("127.0.0.1",), "rtmp://127.0.0.2/live/key") == (403, "target_not_allowed")


@pytest.mark.parametrize("url", [
    "RTMP://a.rtmp.youtube.com/live2/key", " rtmp://a.rtmp.youtube.com/live2/key",
    "rtmp://a.rtmp.youtube.com/live2/key live=1", "rtmp://a.rtmp.youtube.com/live2/key?listen=1",
    "rtmp://a.rtmp.youtube.com/live2/k\x00", "rtmp://a.rtmp.youtube.com/live2/k\u00e9",
    "rtmp://user:pw@a.rtmp.youtube.com/live2/key", "rtmp://a.rtmp.youtube.com/key", "rtmp:///live/key",
    "https://a.rtmp.youtube.com/whip#frag", "ftp://a.rtmp.youtube.com/x", "file:///etc/passwd", 42, None,
    "rtmp://a.rtmp.youtube.com:99999/live2/key", "rtmp://a.rtmp.youtube.com/live2/" + "k" * 3000,
])
def test_urls_it_does_not_understand_are_400(url):
    assert check(("a.rtmp.youtube.com",), url) == (400, "bad_url")


def test_facebook_style_keys_with_a_query_are_understood():
    url = "rtmps://a.rtmp.youtube.com:443/rtmp/FB-123-0-Ab?s_bl=1&s_sc=123&a=Ab_c"
    assert not isinstance(check(("a.rtmp.youtube.com",), url), tuple)


def test_the_config_refuses_an_entry_that_is_no_host():
    with pytest.raises(ConfigError, match="broadcast_targets"):
        ServerConfig.load(None, env={"AVATAR_BROADCAST_TARGETS": "rtmp://x/y"})
    assert ServerConfig.load(None, env={"AVATAR_BROADCAST_TARGETS": "a.b, [::1]:1935"}).broadcast_targets == (
        "a.b", "[::1]:1935")


def test_the_preparation_helper_runs_under_cpu_and_memory_limits():
    import subprocess
    import sys

    code = ("import resource; from engine.runtime.prepare import limit_resources; limit_resources(); "
            "print(resource.getrlimit(resource.RLIMIT_CPU)[0], resource.getrlimit(resource.RLIMIT_AS)[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    from engine.runtime.prepare import CPU_LIMIT_S, MEMORY_LIMIT

    assert [int(v) for v in out] == [CPU_LIMIT_S, MEMORY_LIMIT]
