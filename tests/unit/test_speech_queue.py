"""SpeechQueue: exact sample accounting, start/end marks, cancellation."""

import numpy as np
import pytest

from server.stream.speech_queue import SpeechQueue

pytestmark = pytest.mark.unit


async def test_reads_speech_then_silence_with_marks():
    q = SpeechQueue()
    await q.push("u1", np.full(3000, 7, np.int16))
    q.finish("u1")
    a, b = q.read(1920), q.read(1920)
    assert (a.pcm == 7).all() and [(m.kind, m.offset) for m in a.marks] == [("start", 0)]
    assert (b.pcm[:1080] == 7).all() and (b.pcm[1080:] == 0).all()
    assert [(m.kind, m.offset) for m in b.marks] == [("end", 1080)]
    assert q.read(1920).marks == [] and q.buffered == 0


async def test_cancel_drops_pending_audio():
    q = SpeechQueue()
    await q.push("u1", np.ones(10000, np.int16))
    q.read(1920)
    assert q.cancel() == ["u1"]
    assert not q.read(1920).pcm.any()


async def test_utterances_follow_each_other_without_gaps():
    q = SpeechQueue()
    await q.push("a", np.full(1000, 1, np.int16))
    q.finish("a")
    await q.push("b", np.full(1000, 2, np.int16))
    q.finish("b")
    piece = q.read(1920)
    assert (piece.pcm[:1000] == 1).all() and (piece.pcm[1000:1920] == 2).all()
    assert [(m.kind, m.utterance_id) for m in piece.marks] == [("start", "a"), ("end", "a"), ("start", "b")]
