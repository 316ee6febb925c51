"""The motion model's speech features: log-mel beside the Whisper encoder, streamed."""

import numpy as np
import pytest

from engine.config import SAMPLES_PER_FRAME
from engine.families.motion.mel_features import DIM as MEL_DIM
from engine.families.motion.mel_features import MelFeatureModule, decimate
from engine.families.motion.speech_features import (
    DIM,
    WINDOW,
    SpeechFeatureModule,
    encode,
    feature_module,
    silence,
    stream_rows,
)
from testkit.footprint import footprint


def rows_in_chunks(module: SpeechFeatureModule, pcm: np.ndarray, frames: int, chunk: int) -> np.ndarray:
    state = module.initial_state(0)
    return np.concatenate([module(pcm[f * SAMPLES_PER_FRAME: (f + chunk) * SAMPLES_PER_FRAME], chunk, state)
                           for f in range(0, frames, chunk)])


def test_a_stream_cut_into_any_chunks_gives_the_same_rows(jfk_pcm48):
    frames = 60
    for module in (SpeechFeatureModule(), feature_module(DIM)):  # without and with the noise floor
        small = rows_in_chunks(module, jfk_pcm48, frames, 2)
        large = rows_in_chunks(module, jfk_pcm48, frames, 10)
        assert small.shape == (frames, DIM)
        np.testing.assert_allclose(small, large, atol=1e-4)
    # without the floor, the first columns are the log-mel module's own rows
    small = rows_in_chunks(SpeechFeatureModule(), jfk_pcm48, frames, 2)
    mel = MelFeatureModule()
    np.testing.assert_allclose(small[:, :MEL_DIM], mel(jfk_pcm48[: frames * SAMPLES_PER_FRAME], frames,
                                                     mel.initial_state(0)), atol=1e-5)


def test_silence_gives_the_silent_row_and_speech_does_not(jfk_pcm48):
    module = feature_module(DIM)
    quiet = module(np.zeros(20 * SAMPLES_PER_FRAME, np.int16), 20, module.initial_state(0))
    np.testing.assert_allclose(quiet[:, :MEL_DIM], np.tile(silence(DIM)[:MEL_DIM], (20, 1)), atol=1e-5)
    speech = stream_rows(module, jfk_pcm48, 100)
    away = lambda rows: np.abs(rows[:, MEL_DIM:] - silence(DIM)[MEL_DIM:]).mean(1)  # noqa: E731
    assert away(speech)[50:].min() > 3 * away(quiet).max()


def test_silent_windows_take_the_encoders_own_rows_for_silence_in_their_place(jfk_pcm48):
    """Windows of digital silence skip the encoder (an idle session's every step): their rows
    must be what the encoder says for silence, and the windows heard around them keep theirs."""
    speech = decimate(jfk_pcm48[: 6 * WINDOW]).reshape(2, WINDOW)  # 48 kHz in, two 16 kHz windows out
    batch = np.stack([speech[0], np.zeros(WINDOW, np.float32), speech[1]])
    rows = encode(batch)
    np.testing.assert_array_equal(rows[0], encode(speech[:1])[0])
    np.testing.assert_array_equal(rows[2], encode(speech[1:])[0])
    barely = np.zeros((1, WINDOW), np.float32)
    barely[0, -1] = 1e-6  # not digital silence: the encoder runs on it
    np.testing.assert_allclose(rows[1], encode(barely)[0], atol=1e-4)
    assert np.abs(rows[1] - rows[0]).mean() > 0.1


def test_the_state_stays_the_same_size_over_a_minute(jfk_pcm48):
    module = feature_module(DIM)
    state = module.initial_state(0)
    module(jfk_pcm48[: 4 * SAMPLES_PER_FRAME], 4, state)
    assert state.noise is not None
    size = footprint(state)  # every array and container in it, a field added later too
    assert size > state.history.nbytes + state.mel.tail.nbytes  # the walk reached inside
    loud = np.tile(jfk_pcm48, 6)[: 60 * 25 * SAMPLES_PER_FRAME]
    module(loud, 60 * 25, state)
    assert footprint(state) == size


def test_chunks_must_hold_whole_encoder_steps_and_clips_are_padded(jfk_pcm48):
    module = SpeechFeatureModule()
    with pytest.raises(ValueError, match="multiple"):
        module(jfk_pcm48[: 3 * SAMPLES_PER_FRAME], 3, module.initial_state(0))
    assert stream_rows(module, jfk_pcm48, 7).shape == (7, DIM)


def test_the_feature_module_follows_the_models_inputs():
    assert isinstance(feature_module(MEL_DIM), MelFeatureModule)
    module = feature_module(DIM)
    assert isinstance(module, SpeechFeatureModule) and module.floor is not None, "sessions take the noise floor out"
    assert SpeechFeatureModule().floor is None, "the training data is built without it"
    with pytest.raises(ValueError):
        feature_module(5)
