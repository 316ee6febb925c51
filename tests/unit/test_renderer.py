"""The portrait renderer: lips close fully, the jaw opens the mouth, lids and head move."""

import numpy as np
import pytest

from engine.core import motion
from engine.families.portrait.avatar import DEFAULT_AVATAR, load_portrait
from engine.families.portrait.renderer import PortraitRenderer
from engine.families.portrait.rig import LOWER_INNER, UPPER_INNER
from tests.mouth import dark_pixels

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def renderer() -> PortraitRenderer:
    return PortraitRenderer(load_portrait(DEFAULT_AVATAR))


def frame(renderer, **values) -> np.ndarray:
    coeffs = motion.zeros(1)[0]
    for name, value in values.items():
        coeffs[motion.INDEX[name]] = value
    return renderer.render(coeffs)


def drawn_points(rig, jaw: float) -> np.ndarray:
    """The control points where the renderer draws them at this jaw_open."""
    coeffs = motion.zeros(1)[0]
    coeffs[motion.INDEX["jaw_open"]] = jaw
    return rig.points + rig.displacement(rig.as_drawn(coeffs))


def test_neutral_lips_meet_even_though_the_reference_shows_teeth(renderer):
    rig = renderer.rig
    ref_gap = (rig.lm[LOWER_INNER] - rig.lm[UPPER_INNER])[:, 1].max()
    pts = rig.points + rig.displacement(motion.zeros(1)[0])
    up = pts[[rig.index[i] for i in UPPER_INNER]]
    low = pts[[rig.index[i] for i in LOWER_INNER]]
    assert ref_gap > 5  # the astronaut smiles with her teeth showing
    assert (low[:, 1] - up[:, 1]).max() < 0.5, "no gap is left between the lips"
    assert (low[:, 1] - up[:, 1]).min() > -0.25 * ref_gap, "they press together, no more"


def test_mouth_opens_monotonically_with_the_jaw(renderer):
    counts = [dark_pixels(frame(renderer, jaw_open=j)) for j in (0.0, 0.1, 0.25, 0.5)]
    assert counts[0] < 120
    assert counts == sorted(counts) and counts[-1] > 5 * counts[0]


def test_the_jaw_drops_further_than_the_lips_part_and_the_upper_lip_comes_down(renderer):
    """As in speech (and what makes mediapipe read lips thicker open than shut, as real ones)."""
    rig = renderer.rig
    # both past the shut lips' closure (rig.RELEASE_RATE)
    shut, wide = (drawn_points(rig, jaw) @ rig.frame.down for jaw in (0.4, 0.6))
    at = lambda y, lm_id: y[rig.index[lm_id]]  # noqa: E731
    gap_growth = (at(wide, 14) - at(wide, 13)) - (at(shut, 14) - at(shut, 13))
    assert gap_growth > 0.02 * rig.frame.mouth_width, "the lips part"
    assert at(wide, 13) - at(shut, 13) > 0.5 * gap_growth, "the upper lip comes down with the jaw"
    assert at(wide, 152) - at(shut, 152) > 1.5 * gap_growth, "the chin travels further than the lips part"


def test_open_mouth_shows_teeth_not_a_flat_hole(renderer):
    rgb = frame(renderer, jaw_open=0.5)
    lm = renderer.rig.lm
    x0, x1 = int(lm[78, 0]) + 10, int(lm[308, 0]) - 10
    y0, y1 = int(lm[13, 1]) - 2, int(lm[14, 1]) + 30
    luma = rgb[y0:y1, x0:x1].astype(float) @ [0.299, 0.587, 0.114]
    assert (luma > 170).sum() > 50  # its own teeth
    assert np.percentile(luma, 95) - np.percentile(luma, 5) > 100  # light and shade, not one colour


def test_the_photos_upper_teeth_show_under_the_relaxed_speaking_lip(renderer):
    """The lip comes down from the photo's grin; its upper teeth come part of the way with it."""
    rig = renderer.rig
    rgb = frame(renderer, jaw_open=0.45)  # an open vowel in speech
    pts = drawn_points(rig, 0.45)
    cx, w = rig.frame.mouth_center[0], rig.frame.mouth_width
    top, bottom = (pts[rig.index[i]][1] for i in (13, 14))
    band = rgb[int(top):int(top + 0.35 * (bottom - top)), int(cx - 0.2 * w):int(cx + 0.2 * w)]
    luma = band.astype(float) @ [0.299, 0.587, 0.114]
    assert (luma > 170).mean() > 0.15, "a strip of the upper teeth under the upper lip"


@pytest.mark.parametrize("side,eye", [("blink_l", 386), ("blink_r", 159)])
def test_blink_closes_the_eye(renderer, side, eye):
    lm = renderer.rig.lm
    x, y = lm[eye].astype(int)
    region = (slice(y - 6, y + 10), slice(x - 12, x + 12))
    open_eye, closed_eye = frame(renderer)[region], frame(renderer, **{side: 1.0})[region]
    assert np.abs(open_eye.astype(int) - closed_eye.astype(int)).mean() > 8


def test_head_motion_moves_the_face_but_not_the_frame_corners(renderer):
    still, turned = frame(renderer), frame(renderer, head_yaw=0.05, head_roll=0.03)
    diff = np.abs(still.astype(int) - turned.astype(int)).mean(-1)
    assert diff[200:320, 200:320].mean() > 3
    assert diff[:20, :20].mean() < 0.5 and diff[-20:, -20:].mean() < 0.5
