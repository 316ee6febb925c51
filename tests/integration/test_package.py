"""The package a user installs: the wheel, installed outside the checkout, runs the server
(page, JS client, a talking face at 25 fps) and the batch renderer from its own files; the
JS client packs for npm with its types, at the server's version."""

from __future__ import annotations

import json
import re
import subprocess

import aiohttp
import av
import pytest

from engine.version import package_version
from testkit.install import build_wheel, fresh_environment, pack_client, plays_and_speaks
from testkit.server import ROOT, ServerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple:
    """(bin folder of a fresh environment holding only the wheel, a working folder elsewhere)."""
    work = tmp_path_factory.mktemp("package")
    bin_dir = fresh_environment(build_wheel(work), work / "env")
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    return bin_dir, elsewhere


def test_the_installed_package_is_whole_and_outside_the_checkout(installed):
    bin_dir, elsewhere = installed
    probe = ("import json, engine, server, media, speech, avatar_client;"
             "from engine.families.motion import dit; from engine.families.portrait import avatar, mouth_interior;"
             "from server.routes import operations as o;"
             "print(json.dumps([m.__file__ for m in (engine, server, media, speech, avatar_client)]"
             " + [str(p) for p in (dit.WEIGHTS, avatar.DEFAULT_AVATAR, mouth_interior.BANK, *o.PAGES.values())]))")
    paths = json.loads(subprocess.run([str(bin_dir / "python"), "-c", probe], cwd=elsewhere, capture_output=True,
                                      text=True, check=True).stdout)
    site = bin_dir.parent.resolve()
    assert all(p.startswith(str(site)) and not p.startswith(str(ROOT)) for p in paths), paths
    version = subprocess.run([str(bin_dir / "avatar-server"), "--version"], capture_output=True, text=True,
                             check=True).stdout
    assert package_version() in version


async def test_the_installed_server_serves_the_page_the_client_and_a_talking_face(installed):
    bin_dir, elsewhere = installed
    with ServerProcess(command=(str(bin_dir / "avatar-server"),), cwd=elsewhere) as server:
        async with aiohttp.ClientSession() as http:
            for path, kind in (("/", "text/html"), ("/web/avatar-client.js", "javascript"),
                               ("/web/avatar-client.d.ts", "")):
                async with http.get(server.url + path) as res:
                    assert res.status == 200 and kind in res.content_type and len(await res.read()) > 500, path
        await plays_and_speaks(server.url, "Installed from a wheel.")


def test_the_installed_renderer_writes_an_mp4(installed):
    bin_dir, elsewhere = installed
    subprocess.run([str(bin_dir / "avatar-render"), "--text", "Rendered from the wheel.", "--out", "talk.mp4"],
                   cwd=elsewhere, check=True, capture_output=True, timeout=240)
    with av.open(str(elsewhere / "talk.mp4")) as mp4:
        video = mp4.streams.video[0]
        assert video.average_rate == 25 and mp4.streams.audio, "25 fps video with its audio"
        assert sum(1 for _ in mp4.decode(video=0)) >= 25


def test_npm_pack_gives_the_client_with_its_types_at_the_servers_version(tmp_path):
    package = pack_client(tmp_path)
    manifest = json.loads((package / "package.json").read_text())
    assert manifest["version"] == package_version() and manifest["type"] == "module"
    assert sorted(p.name for p in package.iterdir()) == ["README.md", "avatar-client.d.ts", "avatar-client.js",
                                                         "package.json"]
    # Node resolves the package by name through its exports, as a bundler would.
    app = tmp_path / "app"
    (app / "node_modules").mkdir(parents=True)
    package.rename(app / "node_modules" / manifest["name"])
    exported = subprocess.run(["node", "--input-type=module", "-e",
                               f"import * as c from '{manifest['name']}'; console.log(Object.keys(c).join(' '))"],
                              cwd=app, capture_output=True, text=True, check=True).stdout.split()
    typed = re.findall(r"^export declare (?:class|function) (\w+)",
                       (app / "node_modules" / manifest["name"] / "avatar-client.d.ts").read_text(), re.M)
    assert sorted(exported) == sorted(typed), "every export has its declaration, and no declaration is missing"
