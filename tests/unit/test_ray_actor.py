"""EngineActor without Ray around it: what a Ray call would run, called directly."""

import numpy as np
import pytest

from engine.config import SAMPLES_PER_FRAME, EngineConfig
from engine.runtime.h264 import FrameEncoder
from engine.runtime.ray_actor import EngineActor


def test_an_actor_encodes_each_chunk_and_forgets_a_session_whose_render_failed():
    actor = EngineActor(0, EngineConfig())
    actor.open("s", actor.host.preload, 0)
    units = actor.render("s", 0, bytes(2 * SAMPLES_PER_FRAME * 2), 2, 600_000, False)
    assert len(units) == 2 and units[0].startswith((b"\0\0\0\1", b"\0\0\1")), "Annex B access units"
    assert 1_000 < len(units[0]) < 200_000, "a keyframe of a 512x512 face, not raw pixels"
    with pytest.raises(ValueError, match="samples"):
        actor.render("s", 2, bytes(10), 2, 600_000, False)
    assert actor.host.sessions == {} and actor.encoders == {}, "a failed session leaves nothing behind"
    with pytest.raises(LookupError, match="restarted"):
        actor.render("s", 4, bytes(2 * SAMPLES_PER_FRAME * 2), 2, 600_000, False)


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
