"""The inside of the mouth where the lips part: real teeth, tongue, cavity and shading.

What shows between the lips comes from a ladder of real open mouths (MouthBank: frames
of a real person, each unwrapped between its own inner lips, built by
training/portrait/mouth_bank.py). Each frame, the two rungs nearest the current opening
are laid between the portrait's inner lips and mixed, relit to the portrait's light; their
teeth take the colour of the portrait's own teeth, or of ivory teeth, not of its skin.
A portrait that shows its own teeth keeps them in front (split at the lip midline: the
upper row comes part of the way down with the upper lip, the lower follows the jaw),
with the real cavity behind. Nothing is stretched from the lip texture and nothing is
painted over the lips.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from engine.families.portrait.rig import LOWER_INNER, LOWER_OUTER, UPPER_INNER, UPPER_OUTER, FaceRig
from engine.package_files import package_path

BANK = package_path("engine", "weights", "mouth_bank.npz")
BANK_SHAPE = (32, 96)  # a real mouth unwrapped between its inner lips: depth rows x across columns
CENTRE = UPPER_INNER.index(13)  # 13 and 14 (the middle of the inner lips) share this position
LUMA = np.array([0.299, 0.587, 0.114], np.float32)
TEETH = np.array([250.0, 240.0, 215.0], np.float32)  # ivory: teeth where a portrait shows none of its own
TEETH_CAST = 0.3  # and how much of its skin's colour cast they take (its light, mostly)
TEETH_LIFT = 1.2  # the bank's teeth are GRID s1's, dim against his face under the studio's top light:
# the brightest tenth inside the mouth over the face's, at speech openings, reads 0.69-0.86 on the
# other GRID speakers but 0.74-0.94 on the other held-out people; lifted so, a closed-lip photo's
# teeth read 0.69 / 0.76 / 0.84 at openings of 0.06-0.10 / 0.10-0.14 / 0.14-0.20 eye distances.
# 1.3 read 0.70-0.87 while a closed-lip photo opened only by the jaw's net drop; since it opens
# from rig.REST_GAP its frames show more of the bank's wider rungs, and 1.3 read 0.73-0.90
# (docs/motion.md, "Real inner mouths" and "Every photo talks")
CAST = 0.5  # how much of the portrait's colour cast (light and skin together) the real mouth takes on
UPPER_SHADE = (0.5, 0.06)  # how much the upper lip darkens what is just under it, and how far (mouth widths)
LOWER_SHADE = (0.25, 0.03)
LOWER_FOLLOW = 0.72  # a portrait's own lower teeth drop a little less than the lower lip
UPPER_TEETH_FOLLOW = 0.5  # and its upper teeth come down this share of the upper lip's way: a
# photo's grin shows them high under a raised lip, and the relaxed speaking lip (rig.UPPER_FOLLOW)
# would hide them all behind it (measured on the judge: 0.5 keeps a strip of them in sight)
MONOCHROME = (0.15, 0.3)  # colourfulness's spread of a photo in one tint, and of one in colour
SEAM_SHADE = 0.55  # shut lips meet in a line this much darker than the lips
SEAM_HALF = 0.02  # its half height, in mouth widths

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in frame pixels


def _curve(points: np.ndarray, xs: np.ndarray) -> np.ndarray:
    order = np.argsort(points[:, 0])
    return np.interp(xs, points[order, 0], points[order, 1])


def unwrap(image: np.ndarray, upper: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """What shows between parted inner lips (their points, corner to corner), resampled onto
    a BANK_SHAPE grid: row r at depth r / (rows - 1) from the upper lip to the lower, column c
    at c / (columns - 1) of the way from the left corner to the right."""
    rows, cols = BANK_SHAPE
    left, right = min(upper[0, 0], upper[-1, 0]), max(upper[0, 0], upper[-1, 0])
    xs = np.linspace(left, right, cols, dtype=np.float32)
    top, bottom = _curve(upper, xs), _curve(lower, xs)
    depth = np.linspace(0, 1, rows, dtype=np.float32)[:, None]
    map_x = np.broadcast_to(xs, (rows, cols)).astype(np.float32)
    map_y = (top + (bottom - top) * depth).astype(np.float32)
    return cv2.remap(image, map_x, map_y, cv2.INTER_CUBIC, borderMode=cv2.BORDER_REPLICATE)


def opening_of(upper: np.ndarray, lower: np.ndarray, width: float) -> float:
    """The bank's key: the inner lips' gap at their middle over the mouth width (inner-lip
    points, corner to corner), the same for the bank's frames and a rendered portrait."""
    return float(np.linalg.norm(lower[CENTRE] - upper[CENTRE])) / width


def chroma(rgb: np.ndarray) -> np.ndarray:
    """Colour over luma, per pixel or per row of colours."""
    return rgb / np.maximum(np.asarray(rgb @ LUMA), 1.0)[..., None]


def colourfulness(image: np.ndarray) -> float:
    """0 for a photo in one tint (black-and-white, sepia), 1 for one in colour: how far the
    colours of its pixels (the brighter, 90th percentile) stand from its median colour. Tinted
    prints read 0.06-0.13, colour portraits 0.34-1.6 (the twenty public-domain portraits tried
    for tests/fixtures/portraits)."""
    px = image.reshape(-1, 3).astype(np.float32)
    c = chroma(px[px @ LUMA > 40])
    if not len(c):
        return 1.0
    spread = float(np.percentile(np.linalg.norm(c - np.median(c, 0), axis=1), 90))
    return float(np.clip((spread - MONOCHROME[0]) / (MONOCHROME[1] - MONOCHROME[0]), 0, 1))


def _teeth_weight(grids: np.ndarray) -> np.ndarray:
    """How much each pixel of each rung is tooth: the brightest part of that mouth, widened
    across the narrow gaps between teeth (a gap is a shadow between teeth, not cavity)."""
    luma = grids @ LUMA
    lo, hi = (np.percentile(luma, q, axis=(1, 2))[:, None, None] for q in (60, 90))
    weight = np.clip((luma - lo) / np.maximum(hi - lo, 1.0), 0, 1).astype(np.float32)
    return np.stack([cv2.GaussianBlur(cv2.dilate(w, np.ones((1, 5), np.uint8)), (3, 3), 0) for w in weight])


def between_lips(shape: tuple[int, ...], upper: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """A mask (1 inside) of what lies between the inner lips (their points, corner to corner)."""
    mask = np.zeros(shape, np.uint8)
    cv2.fillPoly(mask, [np.round(np.vstack([upper, lower[::-1]])).astype(np.int32)], 1)
    return mask


def skin_patches(shape: tuple[int, ...], lm: np.ndarray) -> np.ndarray:
    """A mask of small discs on the cheeks, nose, forehead and chin: skin, whatever the mouth does."""
    skin = np.zeros(shape, np.uint8)
    radius = max(2, int(0.09 * float(np.linalg.norm(lm[291] - lm[61]))))
    for i in (50, 280, 205, 425, 4, 195, 151, 9, 199, 200):
        cv2.circle(skin, tuple(int(v) for v in np.round(lm[i])), radius, 1, -1)
    return skin


def face_colours(image: np.ndarray, lm: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Median lip colour, median skin colour and the luma of the brighter skin."""
    lips: np.ndarray = np.zeros(image.shape[:2], np.uint8)
    for outer, inner in ((UPPER_OUTER, UPPER_INNER), (LOWER_OUTER, LOWER_INNER)):
        cv2.fillPoly(lips, [np.round(np.vstack([lm[outer], lm[inner][::-1]])).astype(np.int32)], 1)
    lips = cv2.erode(lips, np.ones((3, 3), np.uint8))
    lip = np.median(image[lips > 0], 0) if lips.sum() > 20 else np.array([150, 80, 80])
    pixels = image[skin_patches(image.shape[:2], lm) > 0].astype(np.float32)
    luma = pixels @ LUMA
    return lip.astype(np.float32), np.median(pixels, 0), float(np.percentile(luma, 95))


@dataclass
class MouthBank:
    """Real open mouths by opening (inner gap at the centre over the mouth width)."""

    openings: np.ndarray  # (K,) ascending
    grids: np.ndarray  # (K, rows, cols, 3) float32, relit to the portrait

    @classmethod
    def load(cls, skin: np.ndarray, bright: float, path: Path = BANK, teeth: np.ndarray | None = None,
             colour: float = 1.0) -> MouthBank:
        """Relit to a portrait: its exposure (the luma of its brighter skin over the bank frame's)
        and part of its light's colour (its skin's chroma over the bank frame's skin's, to the
        power CAST: skin tone and light are not told apart, so only half is taken). Teeth are
        not skin: their colour is set apart (`teeth`, the portrait's own where it shows them,
        else TEETH under a little of its skin's cast), so they are not tinted by the skin.
        `colour` (0-1, `colourfulness`): 0 tones the whole mouth in the skin's tint."""
        with np.load(path) as f:
            openings, grids, bank_skin, bank_bright = f["openings"], f["grids"], f["skin"], f["bright"]
        grids = grids.astype(np.float32)
        exposure = (bright / bank_bright)[:, None]
        gain = exposure * (chroma(skin) / chroma(bank_skin)) ** CAST
        if teeth is None:
            teeth = TEETH * chroma(skin) ** TEETH_CAST
        # a tooth keeps the bank's light and shade (its luma) in the teeth's own colour
        w = _teeth_weight(grids)[..., None]
        tooth = (grids @ LUMA)[..., None] * exposure[:, None, None, :] * chroma(teeth) * TEETH_LIFT
        relit = grids * gain[:, None, None, :] * (1 - w) + tooth * w
        # a black-and-white or sepia photo gets a mouth in its own tone: red gums and ivory
        # teeth in a grey face look pasted on
        toned = (relit @ LUMA)[..., None] * chroma(skin)
        relit = toned + colour * (relit - toned)
        return cls(openings.astype(np.float32), np.clip(relit, 0, 255))

    def lay(self, opening: float, cols: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The mouth at this opening, sampled at grid positions (rows, cols): the two nearest
        rungs mixed, so the picture changes smoothly as the mouth opens and closes."""
        k = int(np.clip(np.searchsorted(self.openings, opening), 1, len(self.openings) - 1))
        lo, hi = self.openings[k - 1], self.openings[k]
        t = float(np.clip((opening - lo) / (hi - lo), 0, 1))
        grid = self.grids[k - 1] * (1 - t) + self.grids[k] * t  # mixed on the small grid: one remap
        map_x = np.broadcast_to(cols, rows.shape).astype(np.float32)
        return cv2.remap(grid, map_x, rows.astype(np.float32), cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


@dataclass
class MouthAtlas:
    """What a portrait's open mouth is made of: the real mouths relit to it, its own teeth as
    RGBA images over the mouth box (upper and lower row) when it shows them, and the colour of
    the line where its shut lips meet."""

    bank: MouthBank
    seam: np.ndarray  # (3,)
    own_teeth: tuple[np.ndarray, np.ndarray] | None = None  # (h, w, 4) float32 each, alpha last


def build_atlas(rig: FaceRig, image: np.ndarray, box: Box) -> MouthAtlas:
    x0, y0, x1, y1 = box
    up, low = rig.lm[UPPER_INNER], rig.lm[LOWER_INNER]
    lip, skin, bright = face_colours(image, rig.lm)
    mask = between_lips((y1 - y0, x1 - x0), up - (x0, y0), low - (x0, y0))
    crop = image[y0:y1, x0:x1].astype(np.float32)
    own, teeth = None, None
    if mask.sum() > 0.02 * rig.frame.mouth_width**2 and crop[mask > 0].mean() > 110:  # shows its teeth
        inside = crop[mask > 0]
        teeth = np.median(inside[inside @ LUMA >= np.median(inside @ LUMA)], 0)  # their colour: the brighter half
        xs = np.arange(x0, x1, dtype=np.float32)
        mid = (_curve(up, xs) + _curve(low, xs)) / 2
        above = np.arange(y0, y1, dtype=np.float32)[:, None] < mid[None, :]
        alpha = cv2.erode(mask, np.ones((3, 3), np.uint8)).astype(np.float32)
        own = (np.dstack([crop, alpha * above]), np.dstack([crop, alpha * ~above]))
    bank = MouthBank.load(skin, bright, teeth=teeth, colour=colourfulness(image))
    return MouthAtlas(bank, lip * SEAM_SHADE, own)


# --- per frame --------------------------------------------------------------------------
def composite(
    frame: np.ndarray, rig: FaceRig, atlas: MouthAtlas, box: Box, disp: np.ndarray, jaw: np.ndarray
) -> None:
    """Paint the mouth interior into `frame` (in place) for control displacements `disp`.

    Work is limited to the bounding rectangle of the parted lips inside the mouth box.
    """
    x0, y0, x1, y1 = box
    pts = rig.points + disp
    up = pts[[rig.index[i] for i in UPPER_INNER]]
    low = pts[[rig.index[i] for i in LOWER_INNER]]
    poly = np.vstack([up, low[::-1]]) - (x0, y0)
    bx, by, bw, bh = cv2.boundingRect(np.round(poly).astype(np.int32))
    sx0, sy0 = max(bx - 2, 0), max(by - 2, 0)  # 2 px: the anti-aliased edge reaches past the rect
    sx1, sy1 = min(bx + bw + 2, x1 - x0), min(by + bh + 2, y1 - y0)
    if sx1 <= sx0 or sy1 <= sy0:
        return
    _seam(frame, rig, atlas, up, low)
    xs = np.arange(x0 + sx0, x0 + sx1, dtype=np.float32)
    top, bottom = _curve(up, xs), _curve(low, xs)
    # shut lips overlap (the closure pulls them past each other): nothing shows between them,
    # so idle frames and most speech frames end here
    parted = np.clip(bottom - top, 0, 1)[None, :]
    if not parted.any():
        return
    mask = np.zeros((sy1 - sy0, sx1 - sx0), np.uint8)
    cv2.fillPoly(mask, [np.round((poly - (sx0, sy0)) * 4).astype(np.int32)], 255, cv2.LINE_AA, shift=2)
    if not mask.any():
        return
    ys = np.arange(y0 + sy0, y0 + sy1, dtype=np.float32)[:, None]
    interior = _real_mouth(rig, atlas, xs, ys, top, bottom, up, low)
    if atlas.own_teeth is not None:
        teeth = _own_teeth(atlas.own_teeth, (sx0, sy0, sx1, sy1), ys < (top + bottom) / 2, jaw)
        interior += (teeth[..., :3] - interior) * teeth[..., 3:4]
    m = (mask.astype(np.float32) / 255 * parted)[..., None]
    target = frame[y0 + sy0:y0 + sy1, x0 + sx0:x0 + sx1]
    target[:] = (target.astype(np.float32) * (1 - m) + interior * m).astype(np.uint8)


def _real_mouth(rig: FaceRig, atlas: MouthAtlas, xs: np.ndarray, ys: np.ndarray, top: np.ndarray,
                bottom: np.ndarray, up: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The bank's mouth at this opening, laid between the lips as they are now."""
    rows, cols = BANK_SHAPE
    left, right = min(up[0, 0], up[-1, 0]), max(up[0, 0], up[-1, 0])
    across = np.clip((xs - left) / max(right - left, 1.0), 0, 1) * (cols - 1)
    depth = np.clip((ys - top) / np.maximum(bottom - top, 1.0), 0, 1) * (rows - 1)
    w = rig.frame.mouth_width
    mouth = atlas.bank.lay(opening_of(up, low, w), across, depth)
    # The portrait's lips shade what lies under them, the upper more (the bank's own shading
    # came from its own lips and light; real wide mouths are darkest just under the upper lip).
    under_upper = np.exp(-np.clip(ys - top, 0, None) / (UPPER_SHADE[1] * w))
    over_lower = np.exp(-np.clip(bottom - ys, 0, None) / (LOWER_SHADE[1] * w))
    shade = (1 - UPPER_SHADE[0] * under_upper) * (1 - LOWER_SHADE[0] * over_lower)
    return mouth * shade[..., None]


def _own_teeth(own: tuple[np.ndarray, np.ndarray], sub: Box, above: np.ndarray, jaw: np.ndarray) -> np.ndarray:
    """The portrait's own teeth: the upper row moved with the upper lip (UPPER_TEETH_FOLLOW of
    its way), the lower row with the jaw (a little less than the lower lip, LOWER_FOLLOW, so the
    opening shows the mouth behind). `jaw`: the jaw's move of the lower and the upper lip."""
    sx0, sy0, sx1, sy1 = sub
    upper, lower = own
    gx, gy = np.meshgrid(np.arange(sx0, sx1, dtype=np.float32), np.arange(sy0, sy1, dtype=np.float32))
    low_shift, up_shift = jaw[0] * LOWER_FOLLOW, jaw[1] * UPPER_TEETH_FOLLOW
    moved = cv2.remap(lower, gx - low_shift[0], gy - low_shift[1], cv2.INTER_LINEAR, borderValue=0)
    upper_moved = cv2.remap(upper, gx - up_shift[0], gy - up_shift[1], cv2.INTER_LINEAR, borderValue=0)
    return np.where(above[..., None], upper_moved, moved)


def _seam(frame: np.ndarray, rig: FaceRig, atlas: MouthAtlas, up: np.ndarray, low: np.ndarray) -> None:
    """Where the lips meet (or nearly), a thin line darker than the lips, as shut lips show:
    it covers what the warp squeezed between them of a photo's parted lips and teeth."""
    w = rig.frame.mouth_width
    half = SEAM_HALF * w
    x0, x1 = int(np.ceil(up[:, 0].min())), int(np.floor(up[:, 0].max()))
    xs = np.arange(x0, x1 + 1, dtype=np.float32)
    top, bottom = _curve(up, xs), _curve(low, xs)
    mid, gap = (top + bottom) / 2, bottom - top
    lat = np.abs(xs - rig.frame.mouth_center[0]) / (0.5 * (x1 - x0) + 1e-6)
    strength = np.clip((2 * half - gap) / half, 0, 1) * np.clip((1 - lat) / 0.2, 0, 1)  # fades as they part
    if not strength.any():
        return
    y0, y1 = int(np.floor((mid - 2 * half).min())), int(np.ceil((mid + 2 * half).max())) + 1
    ys = np.arange(y0, y1, dtype=np.float32)[:, None]
    d = np.abs(ys - mid[None]) / half
    target = frame[y0:y1, x0:x1 + 1].astype(np.float32)
    # lip colour over the band hides the squeezed teeth, a darker core is the line itself
    layers = ((atlas.seam / SEAM_SHADE, np.clip(2 - d, 0, 1) ** 0.5), (atlas.seam, np.clip(1 - 1.6 * d, 0, 1)))
    for colour, alpha in layers:
        a = (alpha * strength[None])[..., None]
        target = target * (1 - a) + colour * a
    frame[y0:y1, x0:x1 + 1] = target.astype(np.uint8)
