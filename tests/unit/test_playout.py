"""Playout: both tracks share each tick; a late engine holds the picture with silence."""

import numpy as np
import pytest

from engine.config import SAMPLES_PER_FRAME
from server.stream.playout import AVFrame, Playout
from server.stream.video_path import EncodedVideo, RawVideo

pytestmark = pytest.mark.unit
SIZE = 16


def make_playout():
    slots = {i: np.full((SIZE * 3 // 2, SIZE), i * 10, np.uint8) for i in range(8)}
    released = []
    playout = Playout(RawVideo(slots.__getitem__, SIZE), released.append, lambda marks, utts: None, SIZE)
    return playout, released


def pcm(value):
    return np.full(SAMPLES_PER_FRAME, value, np.int16)


async def test_audio_and_video_of_a_tick_come_from_the_same_entry():
    playout, released = make_playout()
    playout.push(AVFrame(1, pcm(100)))
    playout.push(AVFrame(2, pcm(200)))
    assert (playout.audio(0, 0) == 100).all()
    assert playout.video(0).to_ndarray()[0, 0] == 10
    assert (playout.audio(0, 1) == 100).all()
    assert playout.video(1).to_ndarray()[0, 0] == 20 and (playout.audio(1, 0) == 200).all()
    assert released == [1, 2]


async def test_late_engine_holds_picture_and_plays_silence():
    playout, _ = make_playout()
    playout.push(AVFrame(3, pcm(5)))
    playout.video(0)
    held = playout.video(1)
    assert held.to_ndarray()[0, 0] == 30 and not playout.audio(1, 0).any()
    assert playout.stats.held == 1
    playout.push(AVFrame(4, pcm(9)))
    assert (playout.audio(2, 0) == 9).all()  # the timeline resumes; nothing was queued behind


async def test_mute_silences_queued_audio_of_cancelled_utterances():
    playout, _ = make_playout()
    playout.push(AVFrame(1, pcm(100), utterances=["u"]))
    playout.mute(["u"])
    assert not playout.audio(0, 0).any()


async def test_engine_made_units_pass_as_they_are_and_a_lost_one_asks_for_a_keyframe():
    """EncodedVideo (a Ray actor's H.264): the track sends each tick's unit, a tick without
    one sends nothing, the taps get the same bytes, and a unit no track took, or frames
    trimmed before they played, make the engine's next unit a keyframe."""
    keyframes, released, tapped = [], [], []
    path = EncodedVideo(lambda slot: b"unit%d" % slot, lambda: keyframes.append(1))
    playout = Playout(path, released.append, lambda marks, utts: None, SIZE)
    playout.taps.append(lambda tick, picture, sound: tapped.append(picture))
    for slot in (1, 2, 3):
        playout.push(AVFrame(slot, pcm(slot)))
    assert bytes(playout.video(0)) == b"unit1" and bytes(playout.video(1)) == b"unit2"
    assert bytes(playout.video(3)) == b"" and tapped == [b"unit1", b"unit2", b"unit3", b""]
    assert not keyframes, "every unit so far was sent, or never existed"
    playout.audio(6, 0)  # tick 2's unit (slot 3) was never sent, and is now past any track
    assert keyframes == [1] and released == [1, 2, 3]
    for slot in (4, 5, 6):
        playout.push(AVFrame(slot, pcm(0)))
    assert playout.trim_silence(keep=1) == 2 and keyframes == [1, 1]
