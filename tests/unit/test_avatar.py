"""Portrait analysis: the cached landmarks of the bundled avatar match a fresh analysis."""

import numpy as np
import pytest

from engine.families.portrait.avatar import (
    DEFAULT_AVATAR,
    NoFaceError,
    cache_path,
    default_source,
    detect_landmarks,
    load_portrait,
    prepare_portrait,
)

pytestmark = pytest.mark.unit


def test_bundled_portrait_cache_matches_the_face_mesh():
    portrait = load_portrait(DEFAULT_AVATAR)
    fresh = detect_landmarks(portrait.image)
    assert portrait.image.shape == (512, 512, 3)
    assert np.abs(fresh - np.load(cache_path(DEFAULT_AVATAR))).max() < 2.0


def test_default_portrait_is_a_face_crop_of_the_astronaut():
    portrait = prepare_portrait(default_source())
    assert np.abs(portrait.image.astype(int) - load_portrait(DEFAULT_AVATAR).image.astype(int)).mean() < 2


def test_image_without_a_face_is_refused():
    noise = np.random.default_rng(0).integers(0, 255, (400, 400, 3), np.uint8)
    with pytest.raises(NoFaceError):
        prepare_portrait(noise)
