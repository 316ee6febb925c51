"""EngineActor without Ray around it: what a Ray call would run, called directly."""

import time

import numpy as np
import pytest

from engine.config import SAMPLES_PER_FRAME, EngineConfig
from engine.families.portrait.avatar import DEFAULT_AVATAR
from engine.runtime.avatar_cache import AvatarCache, AvatarMissing, digest
from engine.runtime.ray_actor import LEASE_S, EngineActor, EngineFull
from media.h264 import FrameEncoder

CHUNK = bytes(2 * SAMPLES_PER_FRAME * 2)
PHOTO = DEFAULT_AVATAR.read_bytes()
KEY = (digest(PHOTO), ".png")


@pytest.fixture
def actor(tmp_path):
    """An actor whose node already holds the default avatar (the front end sent it)."""
    actor = EngineActor(0, EngineConfig(), capacity=2, avatars=AvatarCache(tmp_path))
    actor.store_avatar(KEY, PHOTO)
    return actor


def test_an_avatar_crosses_by_content_once_per_node_and_old_copies_go(tmp_path):
    actor = EngineActor(0, EngineConfig(), capacity=2, avatars=AvatarCache(tmp_path / "node"))
    with pytest.raises(AvatarMissing):
        actor.open("s", KEY, 0)  # the front end's path means nothing here: it sends the file
    with pytest.raises(ValueError, match="damaged"):
        actor.store_avatar(KEY, PHOTO[:-1])
    actor.store_avatar(KEY, PHOTO)
    actor.open("s", KEY, 0)
    assert actor.render("s", 0, CHUNK, 2, 600_000, False), "a frame from the shipped copy"
    cache = AvatarCache(tmp_path / "small", limit=len(PHOTO) + 10)
    other = bytes(100)
    cache.store(KEY[0], ".png", PHOTO)
    cache.store(digest(other), ".png", other, keep={KEY[0]})
    assert (tmp_path / "small" / f"{KEY[0]}.png").exists(), "in use: kept although over the limit"
    cache.store(digest(other + b"x"), ".png", other + b"x")
    left = {p.name for p in (tmp_path / "small").iterdir()}
    assert left == {f"{digest(other)}.png", f"{digest(other + b'x')}.png"}, "the oldest went, to fit the limit"


def test_an_actor_encodes_each_chunk_and_forgets_a_session_whose_render_failed(actor):
    actor.open("s", KEY, 0)
    units = actor.render("s", 0, CHUNK, 2, 600_000, False)
    assert len(units) == 2 and units[0].startswith((b"\0\0\0\1", b"\0\0\1")), "Annex B access units"
    assert 1_000 < len(units[0]) < 200_000, "a keyframe of a 512x512 face, not raw pixels"
    with pytest.raises(ValueError, match="samples"):
        actor.render("s", 2, bytes(10), 2, 600_000, False)
    assert actor.host.sessions == {} and actor.encoders == {}, "a failed session leaves nothing behind"
    with pytest.raises(LookupError, match="restarted"):
        actor.render("s", 4, CHUNK, 2, 600_000, False)


def test_a_frame_encoder_reopens_with_a_keyframe_when_the_rate_moves():
    encoder = FrameEncoder()
    frame = np.full((768, 512), 128, np.uint8)
    first = encoder.encode(frame, 600_000)
    same = encoder.encode(frame, 600_000)
    moved = encoder.encode(frame, 300_000)
    forced = encoder.encode(frame, 300_000, keyframe=True)
    assert encoder.rate == 300_000
    assert len(first) > len(same) and len(moved) > len(same) and len(forced) > len(same), \
        "the first frame, a new rate and a forced one are keyframes; an unchanged frame is a tiny P-frame"


def test_an_actor_holds_its_capacity_and_a_silent_front_ends_sessions_lapse(actor):
    """Two front ends share the actor; one stops renewing (it died): LEASE_S later its
    session is closed and its place is free, while the other's, renewed, plays on."""
    actor.open("a", KEY, 0)
    actor.open("b", KEY, 1)
    with pytest.raises(EngineFull, match="2 sessions"):
        actor.open("c", KEY, 2)
    now = time.monotonic()
    assert actor.renew("front-a", ["a"], now) == {"capacity": 2, "sessions": 2, "callers": 1, "front_ends": 1}
    assert actor.renew("front-b", ["b"], now)["front_ends"] == 2
    later = now + 0.6 * LEASE_S
    actor.renew("front-a", ["a"], later)  # front-b is gone: "b" is not renewed
    assert actor.renew("front-a", ["a"], now + 1.2 * LEASE_S) == \
        {"capacity": 2, "sessions": 1, "callers": 1, "front_ends": 1}, "b lapsed; front-b no longer counts"
    assert set(actor.host.sessions) == {"a"} and set(actor.encoders) == {"a"}
    with pytest.raises(LookupError):
        actor.render("b", 0, CHUNK, 2, 600_000, False)
    actor.open("c", KEY, 2)  # the lapsed session's place
    assert actor.leave("front-a", now + 1.2 * LEASE_S) == 0, "no other front end uses it: the last one may remove it"
