"""The noise floor taken out of the log-mel rows (engine/families/motion/noise_floor.py)."""

import numpy as np

from engine.families.motion.mel_features import BANDS, FLOOR
from engine.families.motion.noise_floor import NoiseFloor


def noisy_rows(rows: int, seed: int = 0) -> np.ndarray:
    """Power rows of a steady noise 30 dB under full scale, as a 32 ms window sees it."""
    return 1e-3 * np.random.default_rng(seed).chisquare(8, (rows, BANDS)) / 8


def test_a_steady_noise_is_taken_down_and_a_louder_sound_over_it_is_kept():
    floor = NoiseFloor()
    power = noisy_rows(300)
    vowels = (np.arange(300) >= 200) & (np.arange(300) % 25 < 15)  # 0.3 s syllables 0.2 s apart, from the 4th second
    power[vowels, 10] += 0.1  # 20 dB over the noise in their band
    out = 10 ** floor(np.log10(power + FLOOR), floor.initial_state())
    db = lambda p: 10 * np.log10(p.mean())  # noqa: E731
    assert db(out[100:200]) < db(power[100:200]) - 15, "the noise falls as far as the gain floor lets it"
    assert db(out[vowels, 10]) > db(power[vowels, 10]) - 1, "the vowels keep their level"
    assert db(out[~vowels & (np.arange(300) >= 200), 10]) < db(power[100:200, 10]) - 10, "the gaps between them fall"


def test_rows_given_one_at_a_time_come_out_as_rows_given_together():
    floor = NoiseFloor()
    log_rows = np.log10(noisy_rows(120, seed=1) + FLOOR)
    whole = floor(log_rows, floor.initial_state())
    state = floor.initial_state()
    parts = np.concatenate([floor(log_rows[i: i + 4], state) for i in range(0, 120, 4)])
    np.testing.assert_allclose(parts, whole, atol=1e-6)
    assert state.history.shape == (75, BANDS), "1.5 s of 20 ms rows, however long the stream"
