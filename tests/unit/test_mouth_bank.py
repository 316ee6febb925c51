"""Which of GRID s1's real mouths the portrait renderer shows at each opening."""

import numpy as np
import pytest

from engine.families.portrait.mouth_interior import BANK, BANK_SHAPE
from training.portrait.mouth_bank import OPENINGS, PARTED, PARTED_FROM, Candidate, parted, pick

pytestmark = pytest.mark.unit

STUDIO = np.array([180.0, 120.0, 100.0])  # his usual skin colour
ORANGE = np.array([220.0, 120.0, 40.0])  # a session lit orange


def _teeth(cavity_rows: int) -> np.ndarray:
    """Bright teeth with a band of dark cavity this many rows high across the middle."""
    grid = np.full((*BANK_SHAPE, 3), 200, np.uint8)
    top = (BANK_SHAPE[0] - cavity_rows) // 2
    grid[top:top + cavity_rows] = 30
    return grid


def _frame(rung: int, score: float, cavity_rows: int, skin: np.ndarray = STUDIO) -> Candidate:
    return Candidate(rung, OPENINGS[rung], _teeth(cavity_rows), score, (skin, skin, 200.0), f"grid-s1/x.mp4#{score}")


def test_teeth_together_read_shut_and_a_dark_band_between_them_reads_apart():
    assert parted(_teeth(0)) == 0.0
    assert parted(_teeth(BANK_SHAPE[0] // 3)) > PARTED


def test_wide_openings_show_the_teeth_apart_under_the_usual_light():
    wide = next(k for k, o in enumerate(OPENINGS) if o >= PARTED_FROM)
    narrow = wide - 1
    together, apart = _frame(wide, 30.0, 0), _frame(wide, 20.0, 12)
    orange = _frame(wide, 25.0, 12, ORANGE)
    sharp_narrow, soft_narrow_apart = _frame(narrow, 30.0, 0), _frame(narrow, 20.0, 12)
    usual = [_frame(0, float(s), 0) for s in range(5)]  # enough of his usual light to set the median
    picks = {c.rung: c for c in pick([together, apart, orange, sharp_narrow, soft_narrow_apart, *usual])}
    assert picks[wide] is apart  # not the sharper teeth-together frame, nor the orange one
    assert picks[narrow] is sharp_narrow  # below PARTED_FROM the sharpest frame, as before
    assert picks[0].score == 4.0


def test_wide_openings_fall_back_to_the_sharpest_frame_when_none_shows_the_teeth_apart():
    wide = len(OPENINGS) - 1
    frames = [_frame(wide, 10.0, 0), _frame(wide, 12.0, 0), _frame(0, 1.0, 0)]
    assert {c.rung: c for c in pick(frames)}[wide] is frames[1]


def test_the_shipped_wide_mouths_show_a_cavity_between_the_teeth():
    with np.load(BANK) as bank:
        wide = [grid for grid, o in zip(bank["grids"], bank["openings"]) if o >= PARTED_FROM]
    assert wide and all(parted(grid) >= PARTED for grid in wide)
