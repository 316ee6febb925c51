"""Video avatars, part by part: the walk through a clip, the mouth bank, the reference file,
the mouth gain; and the preparation of a real person's clip."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from engine.assembly import model_motion
from engine.core import motion
from engine.families.video import adapt
from engine.families.video.mouth import KEY_INDEX, MouthBank, MouthChoice
from engine.families.video.reference import SUFFIX, VideoReference
from engine.families.video.renderer import VideoRenderer
from engine.families.video.walk import FADE, ClipWalk, jump_table, segment_ends, segments, smooth_threshold

pytestmark = pytest.mark.unit


def swaying_head(frames: int, seed: int = 0, leap: bool = True) -> np.ndarray:
    """(T, 468, 2) landmarks of a face that sways about a rest pose (slow sines at unrelated
    rates, a little tracker noise) with, optionally, a leap at frame 300 where two takes were joined."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(100, 400, (468, 2)).astype(np.float32)
    t = np.arange(frames)[:, None]
    sway = 4 * np.sin(t / 25 * np.array([0.9, 0.55]) + rng.uniform(0, 6, 2)) + rng.normal(0, 0.2, (frames, 2))
    if leap:
        sway[300:] += 25
    return (base[None] + sway[:, None]).astype(np.float32)


def test_segments_break_at_cuts_and_leaps_only():
    lm = swaying_head(600)
    scene = np.zeros(600, np.int32)
    scene[450:] = 1
    seg = segments(lm, scene)
    assert list(np.flatnonzero(np.diff(seg))) == [299, 449]
    assert segment_ends(seg)[[0, 299, 300, 449, 450, 599]].tolist() == [299, 299, 449, 449, 599, 599]


def test_the_walk_never_plays_across_a_segment_and_every_move_is_smooth():
    lm = swaying_head(900)
    coeffs = motion.zeros(900)
    scene = np.zeros(900, np.int32)
    seg = segments(lm, scene)
    to, cost = jump_table(lm, coeffs, scene, seg)
    walk = ClipWalk(to, cost, scene, seg, smooth_threshold(lm))
    state = walk.new_state(3)
    prev, ends, moves, visited = state.pos, segment_ends(seg), 0, set()
    for _ in range(25 * 300):  # five minutes
        pos, faded, weight = walk.step(state)
        visited.add(pos)
        if faded < 0 and pos != prev + 1:
            pytest.fail(f"a jump from {prev} to {pos} without a fade")
        if faded >= 0 and weight < 1 / FADE:  # the first frame of a move
            moves += 1
            assert cost[faded].min() < np.inf
        assert pos <= ends[prev] or faded >= 0, "played past the end of a segment"
        prev = pos
    assert 10 <= moves <= 5 * 60, moves  # a move every 1-30 s
    assert len(visited) > 0.5 * 900, "the walk keeps to a small part of the clip"


def test_walk_state_does_not_grow_as_the_session_goes_on():
    lm = swaying_head(600)
    scene = np.zeros(600, np.int32)
    seg = segments(lm, scene)
    walk = ClipWalk(*jump_table(lm, motion.zeros(600), scene, seg), scene, seg, smooth_threshold(lm))
    state = walk.new_state(0)
    fresh = len(pickle.dumps(state))  # everything the state holds, however deep
    for _ in range(25 * 600):  # ten minutes: dozens of moves, each remembered in `recent`
        walk.step(state)
    assert 0 <= state.pos < 600
    assert abs(len(pickle.dumps(state)) - fresh) <= 16, "the walk's state grew"  # ints may take a byte more


def bank_of(jaws: np.ndarray) -> MouthBank:
    lm = np.tile(swaying_head(1)[0], (len(jaws), 1, 1))
    coeffs = motion.zeros(len(jaws))
    coeffs[:, motion.INDEX["jaw_open"]] = jaws
    return MouthBank(lm, coeffs, np.ones(len(jaws), bool), np.zeros(len(jaws), np.int32))


def test_the_bank_picks_the_mouth_the_model_asks_for_and_lets_real_motion_play_on():
    bank = bank_of(np.linspace(0, 1, 101))
    target = motion.zeros(1)[0]
    for jaw in (0.0, 0.33, 0.8):
        target[motion.INDEX["jaw_open"]] = jaw
        assert abs(bank.choose(target, 0, MouthChoice()) / 100 - jaw) < 0.02
    # a near tie goes to the frame after the last choice
    target[motion.INDEX["jaw_open"]] = 0.505
    assert bank.choose(target, 0, MouthChoice(last=49)) == 50


def test_the_composite_changes_only_the_lower_face():
    rng = np.random.default_rng(0)
    lm = swaying_head(2)
    lm[1] = lm[0] + 3.0  # the source frame's head is 3 pixels off
    bank = MouthBank(lm, motion.zeros(2), np.ones(2, bool), np.zeros(2, np.int32))
    base = rng.integers(0, 255, (512, 512, 3), dtype=np.uint8)
    source = rng.integers(0, 255, (512, 512, 3), dtype=np.uint8)
    out = bank.composite(base.copy(), 0, source, 1)
    changed = np.abs(out.astype(int) - base).sum(-1) > 0
    from engine.families.video.mouth import LOWER_FACE

    box_lo, box_hi = lm[0][LOWER_FACE].min(0), lm[0][LOWER_FACE].max(0)
    ys, xs = np.nonzero(changed)
    margin = 0.2 * np.ptp(lm[0][:, 0])
    assert changed.any()
    assert xs.min() >= box_lo[0] - margin and xs.max() <= box_hi[0] + margin
    assert ys.min() >= box_lo[1] - margin and ys.max() <= box_hi[1] + margin


def test_the_mouth_gain_scales_keys_and_keeps_shut_lips_shut():
    gain = np.array([2.0, 1.0, 1.0, 0.5], np.float32)
    c = motion.zeros(1)[0]
    assert np.array_equal(adapt.apply(gain, c), c)
    c[KEY_INDEX] = [0.2, 0.1, 0.3, 0.4]
    c[motion.INDEX["head_yaw"]] = 0.1
    out = adapt.apply(gain, c)
    assert np.allclose(out[KEY_INDEX], [0.4, 0.1, 0.3, 0.2])
    assert out[motion.INDEX["head_yaw"]] == c[motion.INDEX["head_yaw"]]
    assert np.array_equal(adapt.mouth_gain(None, motion.zeros(100), model_motion), np.ones(len(KEY_INDEX), np.float32))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    from engine.families.video.prepare import prepare_clip
    from tests.video import person_clip

    folder = tmp_path_factory.mktemp("video")
    clip = person_clip(folder / "person.mp4")
    return folder / f"{prepare_clip(clip, folder, model_motion)}{SUFFIX}"


def test_preparing_a_real_clip(prepared):
    ref = VideoReference.load(prepared)
    assert ref.frames == 264 and ref.size == 512 and ref.tracked.mean() > 0.99
    assert ref.scene.max() == 0, "five takes in one room are one shot"
    # the joins between the five takes are leaps the walk never plays across: segments break
    # at the joins (a smooth one may pass), and at most once inside a take
    from tests.video import CREMA
    from training.motion.real_faces import read_clip

    joins = np.cumsum([len(read_clip(p)[0]) for p in CREMA[:5]])[:-1]
    breaks = np.flatnonzero(np.diff(ref.segment)) + 1
    at_joins = [b for b in breaks if np.abs(joins - b).min() <= 1]
    assert len(at_joins) >= 3 and len(breaks) - len(at_joins) <= 1, (breaks, joins)
    assert np.all(np.isfinite(ref.coeffs)) and ref.coeffs[:, motion.INDEX["jaw_open"]].std() > 0.05
    assert 0.5 <= ref.mouth_gain.min() and ref.mouth_gain.max() <= 2.5
    # the face is where the landmarks say: the nose tip is skin, not the green screen
    nose = ref.landmarks[100, 1].astype(int)
    r, g, b = ref.decode(100)[nose[1], nose[0]].astype(int)
    assert r > g, "landmarks and frames disagree"


def test_rendering_follows_the_jaw_without_visible_jumps(prepared):
    """(Its speed is measured by bench/video_avatar.py, beside the portrait renderer's.)"""
    from engine.families.video.tracking import frames_opening

    renderer = VideoRenderer(VideoReference.load(prepared))
    state = renderer.new_state(0)
    jaw = 0.4 * (1 + np.sin(np.arange(100) / 100 * 2 * np.pi * 4)) / 2  # four slow opens
    coeffs = motion.zeros(100)
    coeffs[:, motion.INDEX["jaw_open"]] = jaw
    frames = [renderer.render(c, state) for c in coeffs]
    opening = frames_opening(frames)
    assert np.corrcoef(opening, jaw)[0, 1] > 0.8
    steps = np.abs(np.diff(np.array([f.astype(np.float32).mean() for f in frames])))
    assert steps.max() < 4, "a visible jump in the picture"


def test_a_worker_keeps_only_the_avatars_in_use_and_a_few_idle_ones(prepared, tmp_path, monkeypatch):
    """A video avatar holds its clip in memory: a worker that served many must not keep them all."""
    import shutil
    from multiprocessing import Pipe

    from engine.config import EngineConfig
    from engine.runtime import host as host_module
    from engine.runtime import worker as worker_module
    from engine.runtime.ipc import CloseSessionRequest, FrameRing, OpenSessionRequest

    ring = FrameRing(512, 4)
    ours, theirs = Pipe()
    try:
        w = worker_module.EngineWorker(0, theirs, ring.shm.name, EngineConfig(ring_slots=4))
        copies = []
        for i in range(5):
            copy = tmp_path / f"copy{i}{SUFFIX}"
            shutil.copy(prepared, copy)
            copies.append(str(copy))
            w.handle(OpenSessionRequest(f"s{i}", str(copy), i))
            w._loading[str(copy)].result(timeout=30)  # it loads on the worker's helper thread
            w.finish_loads()
            assert f"s{i}" in w.host.sessions
            if i != 1:
                w.handle(CloseSessionRequest(f"s{i}"))
        kept = set(w.host.pipelines)
        assert copies[1] in kept, "an avatar with a live session is kept"
        assert len(kept - {copies[1]}) <= host_module.IDLE_PIPELINES
        assert copies[4] in kept, "the most recent idle ones are the ones kept"
        w.ring.shm.close()
        w._loader.shutdown()
    finally:
        ring.shm.close()
        ring.shm.unlink()


def test_a_worker_keeps_rendering_its_sessions_while_a_new_avatar_loads(prepared, monkeypatch):
    """Loading an avatar (a video avatar reads its whole clip) happens beside the rendering:
    a session already on the worker gets its frames before the new one has opened."""
    import threading
    from multiprocessing import Pipe

    from engine.config import SAMPLES_PER_FRAME, EngineConfig
    from engine.runtime import host as host_module
    from engine.runtime import worker as worker_module
    from engine.runtime.ipc import (
        FrameRing,
        FramesReadyEvent,
        OpenSessionRequest,
        RenderRequest,
        SessionOpenedEvent,
        ShutdownRequest,
    )

    release = threading.Event()
    real = host_module.pipeline_for

    def slow(path, motion="dit"):  # type: ignore[no-untyped-def]
        if path.name.endswith(SUFFIX):
            assert release.wait(30)
        return real(path, motion)
    monkeypatch.setattr(host_module, "pipeline_for", slow)
    ring = FrameRing(512, 4)
    ours, theirs = Pipe()
    w = worker_module.EngineWorker(0, theirs, ring.shm.name, EngineConfig(ring_slots=4))
    thread = threading.Thread(target=w.serve)
    thread.start()
    try:
        assert ours.recv().__class__.__name__ == "ReadyEvent"
        ours.send(OpenSessionRequest("old", w.host.preload, 0))
        assert isinstance(ours.recv(), SessionOpenedEvent)
        ours.send(OpenSessionRequest("new", str(prepared), 1))  # its load waits for `release`
        ours.send(RenderRequest("old", 0, 0, bytes(2 * SAMPLES_PER_FRAME * 2), [0, 1]))
        assert ours.poll(10)
        first = ours.recv()
        assert isinstance(first, FramesReadyEvent) and first.session_id == "old"
        release.set()
        assert ours.poll(30)
        opened = ours.recv()
        assert isinstance(opened, SessionOpenedEvent) and opened.session_id == "new"
    finally:
        release.set()
        ours.send(ShutdownRequest())
        thread.join(30)
        w.ring.shm.close()
        ring.shm.close()
        ring.shm.unlink()


def test_a_face_turned_away_or_too_small_is_refused_with_its_reason():
    from engine.families.video.clip import ClipError
    from engine.families.video.prepare import check_face

    face = swaying_head(50, leap=False)
    face[:, 234, 0], face[:, 454, 0], face[:, 1, 0] = 100.0, 300.0, 200.0  # cheeks and the nose between
    face[:, [10, 152], 0] = 200.0
    face[:, 10, 1], face[:, 152, 1] = 100.0, 350.0  # forehead to chin: 250 px
    check_face(face, np.ones(50, bool), 0.0)  # frontal: accepted
    turned = face.copy()
    turned[:, 1, 0] = 270.0  # the nose far towards one cheek
    with pytest.raises(ClipError) as err:
        check_face(turned, np.ones(50, bool), 0.0)
    assert err.value.code == "face_turned" and "front" in str(err.value)
    small = face.copy()
    small[:, 152, 1] = 160.0
    with pytest.raises(ClipError) as err:
        check_face(small, np.ones(50, bool), 0.0)
    assert err.value.code == "face_too_small"
    with pytest.raises(ClipError) as err:
        check_face(face, np.ones(50, bool), 0.5)
    assert err.value.code == "several_faces"
