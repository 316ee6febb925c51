"""The open mouth's light against the face's (training/portrait/mouth_light.py)."""

import numpy as np
import pytest

from engine.families.portrait.avatar import DEFAULT_AVATAR, load_portrait
from engine.families.portrait.mouth_interior import between_lips
from engine.families.portrait.rig import LOWER_INNER, UPPER_INNER
from training.portrait.mouth_light import brightness, by_opening, middle

pytestmark = pytest.mark.unit


def test_the_brightest_tenth_inside_the_lips_is_read_against_the_skin_and_the_middle_against_it():
    lm = load_portrait(DEFAULT_AVATAR).landmarks.copy()
    lm[LOWER_INNER] += [0, 12]  # parted lips
    mouth = between_lips((512, 512), lm[UPPER_INNER], lm[LOWER_INNER])
    rows = np.flatnonzero(mouth.any(1))
    image = np.full((512, 512, 3), 200, np.uint8)  # the skin
    image[mouth > 0] = 40  # a dark cavity ...
    image[(mouth > 0) & (np.arange(512)[:, None] < rows[0] + 0.4 * len(rows))] = 150  # ... under a row of teeth
    assert brightness(image, lm) == pytest.approx(0.75, abs=0.01)
    assert middle(image, lm) == pytest.approx(40 / 150, abs=0.03)
    shut = load_portrait(DEFAULT_AVATAR).landmarks.copy()
    shut[LOWER_INNER] = shut[UPPER_INNER]
    assert np.isnan(brightness(image, shut))


def test_frames_are_grouped_by_opening():
    rows = by_opening(np.array([0.07, 0.08, 0.12, 0.3]), np.array([0.5, 0.7, np.nan, 0.9]))
    assert [(r["frames"], r["median"]) for r in rows] == [(2, 0.6), (0, None), (0, None)]
