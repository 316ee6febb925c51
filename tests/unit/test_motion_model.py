"""The trained motion model: numpy/torch parity, the N/I chunk loop, idle motion, streaming = batch."""

import numpy as np
import pytest

from engine.assembly import motion_stages, pipeline_for
from engine.config import FPS, SAMPLES_PER_FRAME
from engine.core import motion
from engine.core.pipeline import Pipeline
from engine.core.stage import AudioChunk
from engine.families.motion.delay import motion_delay_frames
from engine.families.motion.dit import WEIGHTS, MotionDiT, MotionDiTConfig
from engine.families.motion.mel_features import DIM as MEL_DIM
from engine.families.portrait.avatar import DEFAULT_AVATAR
from engine.stages.motion import MotionStage

pytestmark = pytest.mark.unit
TINY = MotionDiTConfig(dim=32, depth=2, heads=2, audio_dim=MEL_DIM)  # log-mel only: fast over long streams


def tiny_model(seed: int = 0) -> MotionDiT:
    """A randomly initialised small MotionDiT, adaLN and output layers included (not zero)."""
    import torch

    from training.motion.model import MotionDiT as TorchDiT

    torch.manual_seed(seed)
    model = TorchDiT(TINY)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return MotionDiT.from_params(model.numpy_params(), TINY), model


def run(stages, pcm: np.ndarray, seed: int = 0, chunk: int = 2) -> np.ndarray:
    pipeline = Pipeline(stages)
    state = pipeline.new_state(seed)
    out = []
    for first in range(0, len(pcm) // SAMPLES_PER_FRAME // chunk * chunk, chunk):
        audio = AudioChunk(first, chunk, pcm[first * SAMPLES_PER_FRAME:(first + chunk) * SAMPLES_PER_FRAME])
        out.append(pipeline.render(audio, state).coeffs)
    return np.concatenate(out)


def test_numpy_forward_equals_the_torch_model():
    import torch

    numpy_model, torch_model = tiny_model()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 10, motion.DIM)).astype(np.float32)
    known = (rng.random((3, 10)) > 0.5).astype(np.float32)
    audio = rng.standard_normal((3, 10, 80)).astype(np.float32)
    sigma = rng.random(3).astype(np.float32)
    with torch.no_grad():
        expected = torch_model(*(torch.from_numpy(a) for a in (x, known, audio, sigma))).numpy()
    got = numpy_model.velocity(x, known, audio, sigma)
    assert np.abs(expected).max() > 0.1  # the comparison is not between zeros
    np.testing.assert_allclose(got, expected, atol=2e-5)


def test_the_stage_runs_n_then_i_chunks_and_keeps_only_the_interior():
    model, _ = tiny_model()
    stage = MotionStage(model)
    calls = []
    sample = model.sample

    def recording(window, known, feats, noise, sigmas):
        out = sample(window, known, feats, noise, sigmas)
        calls.append((known.copy(), window.copy(), out.copy()))
        return out

    model.sample = recording
    state = stage.new_state(0)
    outputs = [stage.step(np.zeros((2, 80), np.float32), state) for _ in range(3)]
    n_known = np.array([True] * 8 + [False] * 2)
    i_known = np.array([True] * 8 + [False] + [True])
    kinds = ["N" if (k == n_known).all() else "I" if (k == i_known).all() else "?" for k, _, _ in calls]
    assert kinds == ["N", "N", "I", "N", "I"]  # N0, N1, I0, N2, I1
    _, n1_in, n1 = calls[1]
    _, i0_in, i0 = calls[2]
    assert np.allclose(outputs[1][0], np.clip(i0[8], stage.low, stage.high))  # the interior comes from I0
    assert np.allclose(outputs[1][1], np.clip(n1[9], stage.low, stage.high))  # the rest of N1 stays
    assert np.array_equal(i0[[7, 9]], i0_in[[7, 9]])  # anchors are inputs; I's own predictions of them are dropped


def test_rolling_state_is_constant_over_ten_simulated_minutes():
    """Ten minutes of audio through context -> motion (tiny model) -> decode at a small size."""
    import cv2

    from engine.families.motion.speech_features import feature_module
    from engine.families.portrait.avatar import Portrait, load_portrait
    from engine.families.portrait.renderer import PortraitRenderer
    from engine.stages.context import ContextStage
    from engine.stages.decode import DecodeStage

    big = load_portrait(DEFAULT_AVATAR)
    small = Portrait(cv2.resize(big.image, (64, 64), interpolation=cv2.INTER_AREA), big.landmarks / 8)
    model, _ = tiny_model()
    pipeline = Pipeline([ContextStage(feature_module(model.config.audio_dim)), MotionStage(model),
                         DecodeStage(PortraitRenderer(small))])
    state = pipeline.new_state(0)
    rng = np.random.default_rng(1)
    shapes = None
    for first in range(0, 10 * 60 * FPS, 2):
        pcm = (rng.standard_normal(2 * SAMPLES_PER_FRAME) * 3000 * (first // 50 % 2)).astype(np.int16)
        pipeline.render(AudioChunk(first, 2, pcm), state)
        now = {name: array.shape for name, array in state.arrays().items()}
        assert shapes is None or now == shapes, f"the rolling state changed at frame {first}"
        shapes = now
    assert state.next_frame == 10 * 60 * FPS and state.stages["motion"].k[0] == 10 * 60 * FPS // 2
    assert len(shapes) >= 4 and state.nbytes() < 64 * 1024


def test_committed_weights_are_small_and_say_how_they_were_made():
    from safetensors import safe_open

    assert WEIGHTS.stat().st_size < 20 * 1024 * 1024
    with safe_open(str(WEIGHTS), "numpy") as f:
        meta = f.metadata()
    assert "config" in meta and "seed" in meta["training"] and "command" in meta["training"]


def test_silence_gives_continuous_idle_motion_that_never_repeats():
    track = run(motion_stages("dit"), np.zeros(60 * 48000, np.int16))
    assert len(track) == 60 * FPS
    assert np.abs(track[:, motion.INDEX["jaw_open"]]).max() < 0.1  # silent: the mouth stays shut
    windows = [track[i:i + 2 * FPS].round(4).tobytes() for i in range(0, len(track) - 2 * FPS + 1)]
    assert len(set(windows)) == len(windows)  # no two 2-second windows alike, at any offset
    head = track[:, [motion.INDEX[k] for k in ("head_yaw", "head_pitch", "head_roll")]]
    assert head.std(0).min() > 0.002  # it moves ...
    assert np.abs(np.diff(head, axis=0)).max() < 0.05  # ... without jumps
    blinks = (np.diff((track[:, motion.INDEX["blink_l"]] > 0.5).astype(int)) == 1).sum()
    assert blinks >= 4  # a blink every few seconds, not a frozen stare


def test_real_speech_moves_the_mouth_and_closes_it_in_pauses(jfk_pcm48):
    track = run(motion_stages("dit"), jfk_pcm48)
    jaw = track[motion_delay_frames():, motion.INDEX["jaw_open"]]  # row t + delay moves frame t
    frames = jfk_pcm48[: len(jaw) * SAMPLES_PER_FRAME].astype(np.float32).reshape(len(jaw), -1)
    db = 20 * np.log10(np.sqrt((frames**2).mean(1)) + 1)
    loud, quiet = db > np.percentile(db, 80), db < np.percentile(db, 15)
    assert jaw[loud].mean() > 0.2 and jaw[quiet].mean() < 0.1
    assert np.corrcoef(jaw, db)[0, 1] > 0.5


def test_streaming_and_batch_give_the_same_frames(jfk_pcm48):
    from engine.batch.runner import batch_frames

    pcm = jfk_pcm48[: 4 * 48000]
    delay = motion_delay_frames()  # a live session plays frame k + delay with the audio of frame k
    padded = np.concatenate([pcm, np.zeros(4 * SAMPLES_PER_FRAME, pcm.dtype)])
    pipeline = pipeline_for(DEFAULT_AVATAR)
    state = pipeline.new_state(5)
    streamed = np.concatenate([
        pipeline.render(AudioChunk(f, 2, padded[f * SAMPLES_PER_FRAME:(f + 2) * SAMPLES_PER_FRAME]), state).frames
        for f in range(0, 100 + delay, 2)])[delay: delay + 100]
    pieces = (pcm[i:i + 10 * SAMPLES_PER_FRAME] for i in range(0, len(pcm), 10 * SAMPLES_PER_FRAME))
    batched = np.concatenate([chunk.frames.copy() for chunk, _ in batch_frames(pieces, DEFAULT_AVATAR, seed=5)])
    assert batched.shape == streamed.shape == (100, 768, 512)
    assert np.array_equal(batched, streamed)


def test_lip_closure_numpy_equals_the_torch_model():
    import torch

    from engine.families.motion.lip_closure import LipClosure, LipClosureConfig
    from training.motion.closure import ClosureNet

    config = LipClosureConfig(members=2)
    torch.manual_seed(0)
    net = ClosureNet(config)
    with torch.no_grad():
        net.feature_mean.normal_()
        net.feature_std.uniform_(0.5, 2)
    params = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    rows = np.random.default_rng(0).standard_normal((5, config.rows, 80)).astype(np.float32)
    with torch.no_grad():
        expected = net.probability(torch.from_numpy(rows)).numpy()
    got = LipClosure.from_params(params, config).probability(rows)
    assert expected.std() > 1e-3  # the members do not all answer the same
    np.testing.assert_allclose(got, expected, atol=1e-5)


def constant_closure(probability: float):
    """A LipClosure whose answer is `probability` whatever it hears."""
    from engine.families.motion.lip_closure import LipClosure, LipClosureConfig

    config = LipClosureConfig(members=1)
    params = {"feature_mean": np.zeros(config.input_dim), "feature_std": np.ones(config.input_dim),
              "members.0.row.weight": np.zeros((config.row_dim, config.input_dim)),
              "members.0.row.bias": np.zeros(config.row_dim),
              "members.0.fc1.weight": np.zeros((config.hidden, config.rows * config.row_dim)),
              "members.0.fc1.bias": np.zeros(config.hidden),
              "members.0.fc2.weight": np.zeros((1, config.hidden)),
              "members.0.fc2.bias": np.array([np.log(probability / (1 - probability))])}
    return LipClosure.from_params(params, config)


def test_the_closure_detector_shuts_the_published_lips_and_leaves_the_models_window(jfk_pcm48):
    from engine.families.motion.speech_features import feature_module
    from engine.stages.context import ContextStage

    pcm = jfk_pcm48[: 3 * 48000]
    model = MotionDiT(WEIGHTS)
    plain, stages = [], {}
    for p in (None, 0.05, 0.99):
        stage = MotionStage(model, closure=None if p is None else constant_closure(p))
        stages[p] = stage
        plain.append(run([ContextStage(feature_module(model.config.audio_dim)), stage], pcm))
    never, always = plain[1], plain[2]
    mouth = [motion.INDEX[k] for k in ("jaw_open", "upper_lip")]
    assert plain[0][:, 0].max() > 0.5, "the speech opens the mouth"
    np.testing.assert_array_equal(never, plain[0])  # under the gate the detector changes nothing
    assert np.abs(always[:, mouth]).max() == 0 and always[:, motion.INDEX["lower_lip"]].max() <= 0
    others = [i for i in range(motion.DIM) if i not in mouth + [motion.INDEX["lower_lip"]]]
    np.testing.assert_array_equal(always[:, others], plain[0][:, others])  # and only the lips


def test_the_engine_shuts_the_lips_for_the_m_of_real_speech(jfk_pcm48):
    """jfk.flac: both force-aligned m's ("my", "americans") shut; its open vowels still open."""
    from training.motion.evaluate import jfk_set, phone_scores, run_motion

    (pcm, segments), = jfk_set()
    jaw = run_motion("dit", pcm)[0][:, motion.INDEX["jaw_open"]]
    closed, opened = phone_scores(jaw, segments)
    assert len(closed) == 2 and all(closed)
    assert np.mean(opened) >= 0.8
    alone = run_motion("dit", pcm, closure=None)[0][:, motion.INDEX["jaw_open"]]
    assert np.corrcoef(jaw, alone)[0, 1] > 0.9, "the detector shuts the lips, it does not redraw the mouth"


def test_french_and_german_speech_move_the_mouth_as_english_does():
    """The model learned English; people also speak French and German to it. The same
    sentences said by one espeak-ng voice in each language: the jaw follows the phoneme
    timings' own jaw curve about as well as in English, p/b/m shut and open vowels open."""
    from training.motion.evaluate import language_set, run_motion, score

    scores = {}
    for language in ("en", "fr", "de"):
        tracks = [(run_motion("dit", pcm)[0], segments, pcm) for pcm, segments in language_set(language, ("m3",))]
        scores[language] = score(tracks, np.ones(motion.DIM))
    for language in ("fr", "de"):
        got = scores[language]
        assert got["reference_corr"] >= max(0.7, scores["en"]["reference_corr"] - 0.1), (language, scores)
        assert got["closure"] >= 0.9 and got["open_vowel"] >= 0.6, (language, got)


def test_a_long_stream_of_varied_speech_keeps_the_mouth_and_every_value_in_range():
    """16 different real GRID utterances back to back (48 s, one stream): every coefficient
    stays in its range, and the mouth opens as much at the end as at the start (the rolling
    window once let `breath` walk to -7.6 and the mouth lost two thirds of its opening)."""
    from training.motion.evaluate import run_motion
    from training.motion.real_faces import REAL_TALKING, read_clip

    clips = sorted((REAL_TALKING / "grid-s1").glob("*.mp4"))[-16:]
    pcm = np.concatenate([read_clip(p)[1] for p in clips])
    coeffs = run_motion("dit", pcm)[0]
    assert np.abs(coeffs[:, motion.INDEX["breath"]]).max() <= 1
    assert np.abs(coeffs[:, [motion.INDEX[k] for k in ("head_yaw", "head_pitch", "head_roll")]]).max() <= 0.5
    quarter = len(coeffs) // 4
    jaw = coeffs[:, motion.INDEX["jaw_open"]]
    assert jaw[-quarter:].std() >= 0.7 * jaw[:quarter].std()
