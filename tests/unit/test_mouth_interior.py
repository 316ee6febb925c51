"""The synthesised mouth of a closed-lip portrait: teeth, a dark cavity, tuned to the face."""

import cv2
import numpy as np
import pytest

from engine.core import motion
from engine.families.portrait.avatar import ASSETS, Portrait, load_portrait
from engine.families.portrait.renderer import PortraitRenderer
from engine.families.portrait.rig import LOWER_INNER, UPPER_INNER

pytestmark = pytest.mark.unit

LUMA = np.array([0.299, 0.587, 0.114])
JAW = 0.5


@pytest.fixture(scope="module")
def portrait() -> Portrait:
    return load_portrait(ASSETS / "closed-mouth.png")


def _open_mouth(portrait: Portrait) -> dict:
    """Luma of the frame at JAW, split into bands of the parted lips across the mouth's middle."""
    renderer = PortraitRenderer(portrait)
    coeffs = motion.zeros(1)[0]
    coeffs[motion.INDEX["jaw_open"]] = JAW
    luma = renderer.render(coeffs).astype(float) @ LUMA
    rig = renderer.rig
    pts = rig.points + rig.displacement(coeffs)
    up, low = pts[[rig.index[i] for i in UPPER_INNER]], pts[[rig.index[i] for i in LOWER_INNER]]
    cx, w = rig.frame.mouth_center[0], rig.frame.mouth_width
    xs = np.arange(int(cx - 0.25 * w), int(cx + 0.25 * w) + 1)
    top, bottom = np.interp(xs, up[:, 0], up[:, 1]), np.interp(xs, low[:, 0], low[:, 1])
    assert (bottom - top).min() > 12  # the lips are well parted

    def band(a: float, b: float) -> np.ndarray:  # mean luma per column, from a to b of the gap
        return np.array([luma[int(np.ceil(t + a * (d - t))):int(np.floor(t + b * (d - t))) + 1, x].mean()
                         for x, t, d in zip(xs, top, bottom)])

    face = np.zeros(luma.shape, np.uint8)
    cv2.fillConvexPoly(face, cv2.convexHull(rig.lm.astype(np.int32)), 1)
    mouth = np.zeros(luma.shape, np.uint8)
    cv2.fillPoly(mouth, [np.round(np.vstack([up, low[::-1]])).astype(np.int32)], 1)
    skin = (face > 0) & (cv2.dilate(mouth, np.ones((5, 5), np.uint8)) == 0)
    return {
        "teeth": band(0.08, 0.3),
        "cavity": band(0.45, 0.6),
        "inside": luma[cv2.erode(mouth, np.ones((3, 3), np.uint8)) > 0],
        "skin": luma[skin],
    }


@pytest.fixture(scope="module")
def mouth(portrait) -> dict:
    return _open_mouth(portrait)


@pytest.fixture(scope="module")
def dark_mouth(portrait) -> dict:
    """The same photo at half the exposure."""
    return _open_mouth(Portrait((portrait.image * 0.5).astype(np.uint8), portrait.landmarks))


def test_a_closed_lip_photo_gets_synthesised_teeth(portrait):
    assert PortraitRenderer(portrait).atlas.synthetic


def test_upper_teeth_are_a_bright_band_just_under_the_lip(mouth):
    assert mouth["teeth"].mean() > 0.6 * np.percentile(mouth["skin"], 90)


def test_teeth_are_separate_teeth_not_a_flat_bar(mouth):
    teeth = mouth["teeth"]
    detail = teeth - np.convolve(teeth, np.ones(9) / 9, mode="same")  # tooth gaps and crowns
    assert detail[4:-4].std() > 10


def test_a_dark_cavity_lies_below_the_teeth(mouth):
    assert mouth["cavity"].mean() < 0.4 * mouth["teeth"].mean()


@pytest.mark.parametrize("which", ["mouth", "dark_mouth"])
def test_teeth_do_not_glow_brighter_than_the_face(which, request):
    m = request.getfixturevalue(which)
    assert np.percentile(m["inside"], 99) < np.percentile(m["skin"], 99) + 20


def test_teeth_follow_the_exposure_of_the_photo(mouth, dark_mouth):
    assert 0.35 < dark_mouth["teeth"].mean() / mouth["teeth"].mean() < 0.65
