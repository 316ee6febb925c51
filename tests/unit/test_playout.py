"""Playout: both tracks share each tick; a late engine holds the picture with silence."""

import numpy as np
import pytest

from engine.config import SAMPLES_PER_FRAME
from server.stream.playout import AVFrame, Playout
from server.stream.video_path import RawVideo

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
