"""The wide stream's paste-back: a photo's surroundings kept at upload, the still frame fitted
around the head, and the generated head blended into it as I420."""

import cv2
import numpy as np

from engine.families.latent.paste import FEATHER, PasteBack
from engine.families.portrait.scene import MAX_CROP_SIDE, Box, Scene, canvas, load_scene, save_scene, scene_path

BLUE, RED = (30, 60, 220), (220, 40, 30)


def wide_photo(crop: Box, size=(1600, 900)) -> np.ndarray:
    """Blue left of the crop, red right of it, a textured square where the face would be."""
    w, h = size
    photo = np.zeros((h, w, 3), np.uint8)
    photo[:, : w // 2], photo[:, w // 2 :] = BLUE, RED
    x, y, s = int(crop.x), int(crop.y), int(crop.side)
    photo[y : y + s, x : x + s] = np.random.default_rng(0).integers(0, 255, (s, s, 3), dtype=np.uint8)
    return photo


def test_a_wide_photo_keeps_its_surroundings_and_the_head_fills_the_frame_height(tmp_path):
    crop = Box(550, 200, 500)
    portrait = tmp_path / "abc.png"
    save_scene(scene_path(portrait), wide_photo(crop), crop)
    scene = load_scene(portrait, np.zeros((512, 512, 3), np.uint8))
    assert scene.crop.side == 500 and scene.image.shape[1] == 500 + 2 * 375  # the margin, not the whole photo
    still, (x, y, side) = canvas(scene, 1280, 720)
    assert still.shape == (720, 1280, 3) and side == 720 and y == 0
    assert x == 280  # centred: the photo reaches far enough both ways
    assert np.abs(still[360, 100].astype(int) - BLUE).max() < 12, "the photo's own left side"
    assert np.abs(still[360, 1180].astype(int) - RED).max() < 12, "the photo's own right side"


def test_a_portrait_without_a_scene_is_its_own_and_its_edge_is_stretched_not_mirrored(tmp_path):
    portrait = np.zeros((512, 512, 3), np.uint8)
    portrait[:, :40] = (0, 200, 0)  # a green left edge
    portrait[:, 40:] = (200, 200, 200)
    scene = load_scene(tmp_path / "none.png", portrait)
    assert scene.crop == Box(0, 0, 512)
    still, (x, y, side) = canvas(scene, 1280, 720)
    assert (x, y, side) == (280, 0, 720)
    assert np.abs(still[360, 20].astype(int) - (0, 200, 0)).max() < 15, "the left edge stretched outwards"
    tall, (tx, ty, tside) = canvas(scene, 720, 1280)
    assert (tx, ty, tside) == (0, 280, 720) and tall.shape == (1280, 720, 3)


def test_a_large_photo_is_kept_at_no_more_than_a_1080p_crop(tmp_path):
    crop = Box(1000, 600, 2400)
    path = tmp_path / "big.scene.npz"
    save_scene(path, wide_photo(crop, (4400, 3600)), crop)
    scene = load_scene(tmp_path / "big.png", np.zeros((8, 8, 3), np.uint8))
    assert scene.crop.side == MAX_CROP_SIDE
    assert max(scene.image.shape[:2]) <= MAX_CROP_SIDE * (1 + 2 * 0.75) + 1


def test_the_head_is_blended_into_the_still_frame_as_one_slow_full_frame_conversion_would():
    rng = np.random.default_rng(1)
    still = rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8)
    paste = PasteBack(still, (280, 0, 720))
    head = rng.integers(0, 255, (512, 512, 3), dtype=np.uint8)
    got = paste(head)
    big = cv2.resize(head, (720, 720), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    w = paste.weight[..., None]
    whole = still.copy()
    whole[:, 280:1000] = np.round(w * big + (1 - w) * still[:, 280:1000]).astype(np.uint8)
    want = cv2.cvtColor(whole, cv2.COLOR_RGB2YUV_I420)
    assert got.shape == (1080, 1280)
    assert np.abs(got.astype(int) - want).max() <= 1


def test_the_blend_ramps_only_on_edges_inside_the_frame():
    paste = PasteBack(np.zeros((720, 1280, 3), np.uint8), (280, 0, 720))
    ramp = round(FEATHER * 720)
    assert paste.weight[0, 360] == 1 and paste.weight[-1, 360] == 1, "top and bottom lie on the frame's border"
    assert paste.weight[360, 0] < 0.05 and paste.weight[360, -1] < 0.05, "left and right lie inside it"
    assert paste.weight[360, ramp + 1] == 1 and np.all(np.diff(paste.weight[360, : ramp + 2]) >= 0)
    green = np.zeros((512, 512, 3), np.uint8)
    green[...] = (0, 255, 0)
    rgb = cv2.cvtColor(paste(green), cv2.COLOR_YUV2RGB_I420)
    assert rgb[360, 640, 1] > 240 and rgb[360, 100].max() < 10


def test_a_square_scene_object_is_its_portrait():
    portrait = np.full((64, 64, 3), 7, np.uint8)
    assert Scene.of_portrait(portrait).crop == Box(0.0, 0.0, 64.0)
