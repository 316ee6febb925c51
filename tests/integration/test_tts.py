"""The piper TTS process: sentence streaming and cancellation safety (real voice)."""

import asyncio
import os

import numpy as np
import pytest

from speech.sentences import split_sentences
from speech.tts import PiperTts

pytestmark = pytest.mark.integration


def test_sentences_split_for_streaming():
    assert split_sentences("Hi there. How are you? Fine!") == ["Hi there.", "How are you?", "Fine!"]
    assert split_sentences("... !!") == []
    long = "word, " * 100
    assert all(len(s) <= 241 for s in split_sentences(long))


async def test_cancelled_sentence_does_not_leak_into_the_next():
    tts = PiperTts()
    await tts.start()
    try:
        short = await tts.synthesize("Yes.")
        task = asyncio.ensure_future(tts.synthesize("This is a much longer sentence that an interrupt cancels midway."))
        await asyncio.sleep(0.02)
        task.cancel()
        again = await tts.synthesize("Yes.")
        assert abs(len(again) - len(short)) < 0.25 * len(short)  # not the long sentence's audio
        assert len(short) / 48000 < 1.5
        assert np.flatnonzero(np.abs(short) > 200)[0] <= 480, "the sentence's first sound waits behind silence"
    finally:
        await tts.close()


async def test_a_grown_piper_is_replaced_while_idle_and_the_voice_goes_on():
    """Bounded by construction: allowed less than its warmed-up size, piper is replaced after a sentence.

    (A factor of 1.0 relied on "Yes." growing the process, which it does not always do.)"""
    import psutil

    tts = PiperTts(recycle_factor=0.5)
    await tts.start()
    try:
        first = tts._proc.pid
        before = await tts.synthesize("Yes.")
        for _ in range(100):  # the recycle happens once the queue is empty
            await asyncio.sleep(0.1)
            if tts.recycled:
                break
        assert tts.recycled >= 1 and tts._proc.pid != first
        assert not psutil.pid_exists(first), "the old process is gone, not left behind"
        after = await tts.synthesize("Yes.")
        assert abs(len(after) - len(before)) < 0.25 * len(before)
    finally:
        await tts.close()


def test_a_killed_servers_scratch_folder_is_removed_by_the_next(tmp_path):
    """A server killed outright never runs close(); the next one sweeps its folder, not a live one's."""
    import subprocess

    from speech.tts import scratch_dir

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"avatar-tts-{gone.pid}-x1"
    live = tmp_path / f"avatar-tts-{os.getppid()}-x2"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "0.wav").write_bytes(b"RIFF")
    mine = scratch_dir(tmp_path)
    assert not dead.exists()
    assert (live / "0.wav").exists()
    assert mine.is_dir() and mine.name.startswith(f"avatar-tts-{os.getpid()}-")


async def test_piper_reads_the_voice_on_one_thread_and_leaves_no_copy_behind(monkeypatch):
    """Its pool of a thread per core straggles whenever a core is busy (speech/one_thread.py):
    the model piper loads must be the voice that onnxruntime sets to one thread."""
    import onnxruntime
    import psutil

    tts = PiperTts()
    await tts.start()
    try:
        cmdline = psutil.Process(tts._proc.pid).cmdline()
        loaded = cmdline[cmdline.index("-m", cmdline.index("piper")) + 1]
        assert psutil.Process(tts._proc.pid).environ()["ORT_LOAD_CONFIG_FROM_MODEL"] == "1"
        monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
        ours = onnxruntime.InferenceSession(loaded, providers=["CPUExecutionProvider"])
        stock = onnxruntime.InferenceSession(str(tts.voice), providers=["CPUExecutionProvider"])
        assert ours.get_session_options().intra_op_num_threads == 1
        assert stock.get_session_options().intra_op_num_threads == 0  # onnxruntime's own choice
        assert [i.name for i in ours.get_inputs()] == [i.name for i in stock.get_inputs()]
        assert len(await tts.synthesize("Yes.")) > 0
    finally:
        await tts.close()
    assert not os.path.exists(loaded)

