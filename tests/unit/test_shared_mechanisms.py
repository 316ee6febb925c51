"""The mechanisms written once and shared: helper process, token bucket, resampler."""

import asyncio
import os
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest

from media.resample import MonoResampler
from server.helper_process import HelperProcess
from server.token_bucket import TokenBucket


async def test_a_helper_that_dies_is_replaced_by_the_next_call():
    helper = HelperProcess()
    try:
        first = await helper.run(os.getpid)
        with pytest.raises(BrokenProcessPool):
            await helper.run(os._exit, 1)
        second = await helper.run(os.getpid)
        assert second not in (first, os.getpid())
    finally:
        helper.close()


async def test_an_idle_helper_ends_and_a_busy_one_does_not():
    helper = HelperProcess(idle_s=0.3)
    try:
        pid = await helper.run(os.getpid)
        assert await helper.run(os.getpid) == pid  # used again within idle_s: the same process
        for _ in range(200):  # up to 20 s on a loaded machine; the event is the process ending
            await asyncio.sleep(0.1)
            if not _alive(pid):
                break
        assert not _alive(pid)
        assert await helper.run(os.getpid) != pid  # and the next call starts another
    finally:
        helper.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has ended too
        return f.read().split()[2] != "Z"


def test_the_bucket_refills_at_the_rate_given_and_caps_at_its_burst():
    bucket = TokenBucket(3, now=0.0)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    bucket.fill(now=0.5, per_s=4)  # two earned
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    bucket.fill(now=100.0, per_s=4)
    assert bucket.tokens == 3


def test_the_resampler_streams_any_rate_to_ours_and_passes_ours_through():
    t = np.arange(16_000) / 16_000
    tone = (np.sin(2 * np.pi * 300 * t) * 8000).astype(np.int16)
    resampler = MonoResampler()
    out = np.concatenate([resampler.pcm(piece, 16_000) for piece in np.array_split(tone, 7)])
    assert abs(len(out) - 48_000) < 200 and abs(np.abs(out).max() - 8000) < 400
    assert resampler.pcm(tone, 48_000) is tone
