"""AVATAR_ENGINE=ray: the engine's workers as actors on a real Ray cluster (`ray start --head`
on loopback, inside the tests' private network namespace), a real server and real aiortc viewers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import aiohttp
import numpy as np
import pytest

from avatar_client import AvatarViewer
from engine.families.video.tracking import track_landmarks
from engine.runtime.avatar_cache import digest
from testkit.ray_head import RayHead, cluster_processes
from testkit.server import ServerProcess
from tests.integration import test_avatars, test_session

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def head():
    """A one-node Ray cluster on 127.0.0.1 with a CPU for each engine actor of this module's servers
    (the pools of two engine settings: see test_front_ends_share_the_clusters_actors)."""
    with RayHead(cpus=4) as head:
        yield head


@pytest.fixture(scope="module")
def node_tmp(head):
    """The Ray node's temporary folder: its actors keep the avatars they are sent in it."""
    return head.temp_dir


@pytest.fixture(scope="module")
def ray_head(head):
    """The cluster's address."""
    return head.address


@pytest.fixture(scope="module")
def avatars_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("avatars")


@pytest.fixture(scope="module")
def ray_server(ray_head, avatars_dir):
    env = {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": ray_head, "AVATAR_WORKERS": "1",
           "AVATAR_AVATARS_DIR": str(avatars_dir), "AVATAR_BROADCAST_TARGETS": "127.0.0.1"}
    with ServerProcess(env) as server:
        yield server


@pytest.mark.parametrize("check", [test_session.test_speak_moves_the_mouth_with_audio_and_silence_keeps_it_closed,
                                   test_session.test_interrupt_silences_audio_and_reports_played_time],
                         ids=["speak_moves_the_mouth", "interrupt_silences"])
async def test_the_local_engines_session_checks_hold_on_ray(ray_server, check):
    """The local engine's session tests (tests/integration/test_session.py), run as they are."""
    await check(ray_server)


async def test_an_uploaded_avatar_reaches_the_actors_node_by_content(ray_server, avatars_dir, node_tmp):
    """The local engine's upload test, on Ray; the avatar went to the actor as bytes (on a
    machine of its own, the front end's path would mean nothing there)."""
    await test_avatars.test_portrait_upload_is_listed_and_usable(ray_server)
    uploaded = [p for p in avatars_dir.glob("*.png") if p.stem != "default"]
    assert len(uploaded) == 1, uploaded
    copies = {p.name for p in (node_tmp / "avatar-server-avatars").iterdir()}
    assert f"{digest(uploaded[0].read_bytes())}.png" in copies, copies


async def test_added_viewers_and_a_broadcast_take_the_actors_access_units(ray_server):
    """With the Ray engine the frames arrive encoded: an added viewer gets those units as
    they are, and an RTMP broadcast decodes them and publishes its own constant 25 fps."""
    import threading

    from testkit.rtmp import NginxRtmp
    from testkit.whep import WhepViewer
    from tests.integration.test_broadcast import Played, broadcast, play

    owner = AvatarViewer(ray_server.url)
    with NginxRtmp() as ingest:
        played, ready = Played(), threading.Event()
        player = asyncio.ensure_future(asyncio.to_thread(play, ingest.url("ray"), 6.0, played, ready))
        added = None
        try:
            await owner.connect()
            await owner.wait_frames(25)
            await asyncio.to_thread(ready.wait, 5)
            async with aiohttp.ClientSession() as http:
                assert (await broadcast(http, ray_server.url, owner.session_id, ingest.url("ray")))[0] == 202
            added = WhepViewer(ray_server.url, f"/v1/sessions/{owner.session_id}/viewers")
            await added.connect()
            await added.wait_frames(25, 30)
            assert await added.fps(2) >= 20, "the added viewer's frames per second on Ray"
            assert np.isfinite(track_landmarks([added.last])[0, 0, 0]), "no face for the added viewer"
            await player
        finally:
            player.cancel()
            if added:
                await added.close()
            await owner.close()
    assert played.codecs == ("h264", "aac"), played.codecs
    times = np.array([t for t, _, _ in played.video])
    assert len(times) >= 100 and np.allclose(np.diff(times), 0.04, atol=0.002), len(times)


async def health(url: str) -> dict:
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/healthz") as res:
            return await res.json()


async def two_playing(url: str) -> tuple[list[AvatarViewer], list[float]]:
    """Two viewers connected, each recording its events; the frames per second the server
    sent each over its next three stats reports (what a viewer gets, whether or not this
    busy test process decodes them all in time)."""
    viewers = [AvatarViewer(url), AvatarViewer(url)]
    for viewer in viewers:
        await viewer.connect()
        await viewer.record_events()
    await asyncio.gather(*(v.wait_frames(25, timeout=60) for v in viewers))
    return viewers, list(await asyncio.gather(*(sent_fps(v) for v in viewers)))


async def sent_fps(viewer: AvatarViewer, reports: int = 3) -> float:
    after = time.time()
    for _ in range(reports):
        after = (await viewer.wait_event("stats", 10, after=after))["t"] + 1e-3
    stats = [e for e in viewer.seen if e["type"] == "stats"][-reports:]
    print("stats", [(e["fps"], e["fresh_fps"]) for e in stats])
    return sum(e["fps"] for e in stats) / len(stats)


async def one_ends_with_worker_died(viewers: list[AvatarViewer], since: float) -> AvatarViewer:
    """The first viewer told `worker_died` (within 2 s and a ping of `since`); the other one, still playing."""
    waits = {asyncio.ensure_future(v.wait_event("error", 15)) for v in viewers}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    error = next(iter(done)).result()
    assert error["code"] == "worker_died", error
    assert time.monotonic() - since < 3, "worker_died came later than 2 s (and a ping) after the loss"
    survivor = next(v for v in viewers if not any(e["type"] == "error" for e in v.seen))
    assert await survivor.sent_fps() >= 20, "the session on the other actor stopped"  # sent, not decoded here
    return survivor


async def test_sessions_play_on_ray_actors_and_a_killed_actor_ends_only_its_session(ray_head):
    env = {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": ray_head, "AVATAR_WORKERS": "2"}
    with ServerProcess(env) as server:
        viewers: list[AvatarViewer] = []
        later = AvatarViewer(server.url)
        try:
            viewers, rates = await two_playing(server.url)
            info = await health(server.url)
            assert info["engine"] == "ray" and len(info["workers"]) == 2, info
            assert sorted(w["sessions"] for w in info["workers"]) == [1, 1], f"one session per actor: {info}"
            assert all(w["ready"] and w["node"] for w in info["workers"]), info
            assert min(rates) >= 23, f"frames per second on Ray actors: {rates}"
            # encoded on the actor's node, decoded here: the picture is the avatar's face
            faces = track_landmarks([v.received.video[-1][1] for v in viewers])
            assert np.isfinite(faces[:, 0, 0]).all(), "no face in the frames the actors encoded"

            victim = info["workers"][0]
            os.kill(victim["pid"], signal.SIGKILL)
            await one_ends_with_worker_died(viewers, time.monotonic())

            for _ in range(120):  # Ray restarts the actor; the server sees its new process
                info = await health(server.url)
                if info["worker_restarts"] == 1 and all(w["ready"] for w in info["workers"]):
                    break
                await asyncio.sleep(0.5)
            assert info["worker_restarts"] == 1 and info["workers"][0]["pid"] != victim["pid"], info
            await later.connect()
            await later.wait_frames(25, timeout=60)
        finally:
            for viewer in [*viewers, later]:
                await viewer.close()


@contextlib.contextmanager
def ray_cluster(**second_node):
    """Ray's own test cluster: a head and a second node (with `second_node`'s resources), one
    CPU each, both on 127.0.0.1; the cluster and the second node."""
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    node = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        second = cluster.add_node(**node, **second_node)
        cluster.wait_for_nodes()
        yield cluster, second
    finally:
        cluster.shutdown()


@pytest.fixture
def two_nodes():
    with ray_cluster() as nodes:
        yield nodes


async def test_sessions_land_on_both_nodes_and_a_removed_node_ends_only_its_sessions(two_nodes):
    cluster, second = two_nodes
    env = {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": cluster.address, "AVATAR_WORKERS": "2"}
    with ServerProcess(env) as server:
        viewers: list[AvatarViewer] = []
        later = AvatarViewer(server.url)
        try:
            viewers, rates = await two_playing(server.url)
            info = await health(server.url)
            nodes = {w["node"] for w in info["workers"] if w["sessions"] == 1}
            assert len(nodes) == 2 and second.node_id in nodes, f"a session on each node: {info}"
            assert min(rates) >= 23, f"frames per second on two nodes: {rates}"

            removed_at = time.monotonic()
            await asyncio.to_thread(cluster.remove_node, second, allow_graceful=False)
            await one_ends_with_worker_died(viewers, removed_at)
            for _ in range(20):  # the lost actor has no node to restart on: it stays out of placement
                info = await health(server.url)
                if sum(w["ready"] for w in info["workers"]) == 1:
                    break
                await asyncio.sleep(0.5)
            assert sum(w["ready"] for w in info["workers"]) == 1, info
            await later.connect()  # placed on the head node's actor, beside the survivor
            await later.wait_frames(25, timeout=60)
        finally:
            for viewer in [*viewers, later]:
                await viewer.close()


async def test_front_ends_share_the_clusters_actors_and_a_dead_front_ends_sessions_lapse(ray_head):
    """Two servers, one pool of two actors of one session each: two sessions opened on both at
    once both play, each server sees the other's session, and a third is refused (503 at_capacity). One
    server is killed: its session lapses on its lease, and the other may use the place."""
    from engine.runtime.ray_actor import LEASE_S

    env = {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": ray_head, "AVATAR_WORKERS": "2",
           "AVATAR_SESSIONS_PER_WORKER": "1"}
    with ServerProcess(env) as first, ServerProcess(env) as second:
        viewers = [AvatarViewer(first.url), AvatarViewer(second.url)]
        third, later = AvatarViewer(first.url), AvatarViewer(first.url)
        try:
            # at once, before a ping tells either server of the other's session: both pick the same
            # actor first, and the one it refuses (EngineFull) tries the other
            await asyncio.gather(*(v.connect() for v in viewers))
            await viewers[0].record_events()
            await asyncio.gather(*(v.wait_frames(25, timeout=60) for v in viewers))
            await asyncio.sleep(1.5)
            for url in (first.url, second.url):
                info = await health(url)
                assert info["cluster"] == {"sessions": 2, "capacity": 2}, info
                assert sorted((w["sessions"], w["ours"]) for w in info["workers"]) == [(1, 0), (1, 1)], info
                assert all(w["front_ends"] == 2 for w in info["workers"]), info
            with pytest.raises(RuntimeError, match="503.*at_capacity.*engine cluster is full"):
                await third.connect()

            second.proc.kill()  # no goodbye: only the lease frees its session's place
            killed = time.monotonic()
            for _ in range(int(LEASE_S + 10) * 2):
                if (await health(first.url))["cluster"]["sessions"] == 1:
                    break
                await asyncio.sleep(0.5)
            assert (await health(first.url))["cluster"] == {"sessions": 1, "capacity": 2}
            assert time.monotonic() - killed < LEASE_S + 5, "the dead front end's session outlived its lease"
            await later.connect()
            await later.wait_frames(25, timeout=60)
            # what the server sent (a stopped session sends none), not what this busy process
            # managed to decode beside a second stream: that read 19.98 once
            assert await viewers[0].sent_fps() >= 20, "the first server's session stopped"
        finally:
            for viewer in [*viewers, third, later]:
                await viewer.close(delete=False)


@pytest.fixture
def gpu_node():
    """The second node declares one GPU (Ray schedules by declared resources, so placement on
    GPU nodes is tested without a GPU)."""
    with ray_cluster(num_gpus=1) as nodes:
        yield nodes


async def test_actors_of_one_gpu_each_go_to_the_gpu_nodes_and_leave_with_their_front_end(gpu_node):
    cluster, gpu = gpu_node
    env = {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": cluster.address, "AVATAR_WORKERS": "1",
           "AVATAR_RAY_WORKER_GPUS": "1"}
    with ServerProcess(env) as server:
        viewer = AvatarViewer(server.url)
        try:
            [worker] = (await health(server.url))["workers"]
            assert worker["node"] == gpu.node_id and worker["gpus"] == ["0"], worker
            await viewer.connect()
            await viewer.wait_frames(25, timeout=60)
        finally:
            await viewer.close()
    import ray  # the pool's only front end has stopped: it took its detached actors with it

    await asyncio.to_thread(ray.init, address=cluster.address, namespace="avatar-server", log_to_driver=False)
    try:
        assert ray.util.list_named_actors() == [], "the stopped front end left its engine actors behind"
    finally:
        ray.shutdown()


async def test_with_every_actor_gone_new_sessions_get_503_engine_unavailable(ray_head):
    import ray

    env = {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": ray_head, "AVATAR_WORKERS": "1"}
    with ServerProcess(env) as server:
        names = [w["name"] for w in (await health(server.url))["workers"]]  # with those other front ends made
        await asyncio.to_thread(ray.init, address=ray_head, namespace="avatar-server", log_to_driver=False)
        try:
            for name in names:
                ray.kill(ray.get_actor(name), no_restart=True)  # gone for good, not restarting
        finally:
            ray.shutdown()
        for _ in range(20):
            info = await health(server.url)
            if not any(w["ready"] for w in info["workers"]):
                break
            await asyncio.sleep(0.5)
        viewer = AvatarViewer(server.url)
        try:
            with pytest.raises(RuntimeError, match="503.*engine_unavailable"):
                await viewer.connect()
        finally:
            await viewer.close(delete=False)
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url + "/metrics") as res:
                assert "avatar_engine_workers_ready 0.0" in await res.text()


def test_a_test_cluster_stops_alone(head):
    """Stopping a test's Ray head ends its own processes (daemons, agents) and leaves another
    cluster of the machine running: `ray stop` would end them all."""
    other = RayHead(cpus=1)
    with other:
        assert len(cluster_processes(other.temp_dir)) >= 3
    assert not cluster_processes(other.temp_dir) and not other.temp_dir.exists()
    assert cluster_processes(head.temp_dir), "the module's cluster was stopped too"
