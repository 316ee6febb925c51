"""The inside of the mouth where the lips part: teeth, cavity, tongue and shading.

Upper teeth stay with the skull, lower teeth move with the jaw. A portrait that shows
its teeth lends them (its own inner-mouth pixels, split at the lip midline); one with
closed lips gets a synthesised mouth: a row of upper teeth hanging just under the
upper lip (gums above, shaded and receding towards the corners), lower teeth that
stay behind the lower lip until the jaw opens wide, a tongue, and a dark cavity, all
tinted from the portrait's own lip and skin colour. Nothing is ever stretched from
the lip texture and nothing is painted over the lips.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engine.families.portrait.rig import LOWER_INNER, LOWER_OUTER, UPPER_INNER, UPPER_OUTER, FaceRig

# The look of a portrait's own teeth (kept as it has always been).
CAVITY_TOP = np.array([38, 12, 14], np.float32)
CAVITY_TONGUE = np.array([150, 62, 66], np.float32)

LUMA = np.array([0.299, 0.587, 0.114], np.float32)
IVORY = np.array([1.04, 1.0, 0.90], np.float32)  # teeth chroma, per unit of luma
MOUTH_MM = 50.0  # a mouth width, in millimetres: the tooth sizes below are real ones
# Crown widths along the arch from the midline outwards (incisors, canine, premolars,
# molars), and how far each crown reaches from its gum line into the mouth, in mm (the
# upper gum line is the reference's upper lip line, so that is how much a tooth shows).
UPPER_WIDTHS = np.array([8.6, 6.6, 7.6, 7.0, 6.6, 10.0, 9.0], np.float32)
UPPER_SHOW = np.array([6.4, 5.4, 6.0, 4.9, 4.3, 3.8, 3.2], np.float32)
LOWER_WIDTHS = np.array([5.4, 5.9, 6.9, 7.0, 7.1, 11.0], np.float32)
LOWER_SHOW = np.array([7.5, 7.5, 7.6, 6.8, 6.0, 5.2], np.float32)
ARCH_MM = 23.0  # the arch seen from the front: x = ARCH * tanh(arc length / ARCH)
LOWER_FOLLOW = 0.72  # the lower lip drops a little further than the lower teeth
SEAM_SHADE = 0.55  # shut lips meet in a line this much darker than the lips
SEAM_HALF = 0.02  # its half height, in mouth widths
LOWER_HIDE = 0.048  # lower teeth start this far (mouth widths) under the lower lip

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in frame pixels


@dataclass
class TeethAtlas:
    """Upper and lower teeth as RGBA images in reference coordinates of the mouth box.

    A synthesised mouth also carries its cavity and tongue colours, the reference top of
    the lower teeth per box column (the tongue rests behind them), and how much of the
    jaw's motion the lower teeth follow.
    """

    upper: np.ndarray  # (h, w, 4) float32, alpha last
    lower: np.ndarray
    synthetic: bool = False
    cavity: np.ndarray | None = None  # (2, 3): near the lips, deep inside
    tongue: np.ndarray | None = None  # (3,)
    lower_top: np.ndarray | None = None  # (w,) reference y of the lower teeth
    lower_follow: float = 1.0
    seam: np.ndarray | None = None  # (3,) colour of the line where shut lips meet


def _curve(points: np.ndarray, xs: np.ndarray) -> np.ndarray:
    order = np.argsort(points[:, 0])
    return np.interp(xs, points[order, 0], points[order, 1])


def _split_masks(rig: FaceRig, box: Box, upper_pts: np.ndarray, lower_pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x0, y0, x1, y1 = box
    xs = np.arange(x0, x1, dtype=np.float32)
    mid = (_curve(upper_pts, xs) + _curve(lower_pts, xs)) / 2
    ys = np.arange(y0, y1, dtype=np.float32)[:, None]
    above = ys < mid[None, :]
    return above, ~above


def build_atlas(rig: FaceRig, image: np.ndarray, box: Box) -> TeethAtlas:
    """Use the portrait's own teeth when it shows them, else synthesise a set."""
    x0, y0, x1, y1 = box
    up, low = rig.lm[UPPER_INNER], rig.lm[LOWER_INNER]
    poly = np.vstack([up, low[::-1]]) - (x0, y0)
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.fillPoly(mask, [np.round(poly).astype(np.int32)], 1)
    crop = image[y0:y1, x0:x1].astype(np.float32)
    shows_teeth = mask.sum() > 0.02 * rig.frame.mouth_width**2 and crop[mask > 0].mean() > 110
    colours = _portrait_colours(rig, image)
    if shows_teeth:
        above, below = _split_masks(rig, box, up, low)
        alpha = cv2.erode(mask, np.ones((3, 3), np.uint8)).astype(np.float32)
        atlas = TeethAtlas(np.dstack([crop, alpha * above]), np.dstack([crop, alpha * below]))
    else:
        atlas = _synthetic_atlas(rig, box, *colours)
    atlas.seam = colours[0] * SEAM_SHADE
    return atlas


# --- the synthesised mouth ------------------------------------------------------------
def _portrait_colours(rig: FaceRig, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Median lip colour, median skin colour and the luma of the brighter skin."""
    lm, w = rig.lm, rig.frame.mouth_width
    lips: np.ndarray = np.zeros(image.shape[:2], np.uint8)
    for outer, inner in ((UPPER_OUTER, UPPER_INNER), (LOWER_OUTER, LOWER_INNER)):
        cv2.fillPoly(lips, [np.round(np.vstack([lm[outer], lm[inner][::-1]])).astype(np.int32)], 1)
    lips = cv2.erode(lips, np.ones((3, 3), np.uint8))
    lip = np.median(image[lips > 0], 0) if lips.sum() > 20 else np.array([150, 80, 80])
    skin = np.zeros(image.shape[:2], np.uint8)
    for i in (50, 280, 205, 425, 4, 195, 151, 9, 199, 200):  # cheeks, nose, forehead, chin
        cv2.circle(skin, tuple(int(v) for v in np.round(lm[i])), max(2, int(0.09 * w)), 1, -1)
    pixels = image[skin > 0].astype(np.float32)
    luma = pixels @ LUMA
    return lip.astype(np.float32), np.median(pixels, 0), float(np.percentile(luma, 95))


def _tooth_layout(
    lat: np.ndarray, widths: np.ndarray, w: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For lateral positions (half mouth widths), which tooth is there and where across it.

    Returns the tooth index, the position across the tooth (0..1), the tooth's width on
    screen in pixels, how squarely it faces the camera (1 at the front, towards 0 at the
    back of the arch) and whether there is a tooth at all (not past the last molar).
    """
    arch = ARCH_MM / (MOUTH_MM / 2)  # in half mouth widths
    r = np.clip(np.abs(lat) / arch, 0, 0.9999)
    s = arch * np.arctanh(r) * (MOUTH_MM / 2)  # arc length from the midline, mm
    edges = np.concatenate([[0], np.cumsum(widths)])
    tooth = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, len(widths) - 1)
    across = np.clip((s - edges[tooth]) / widths[tooth], 0, 1)
    facing = 1 - r**2  # d(screen x)/d(arc length)
    px = widths[tooth] * facing * w / MOUTH_MM
    return tooth, across, px, facing, s < edges[-1]


def _teeth_layer(rig: FaceRig, box: Box, line: np.ndarray, widths: np.ndarray, show: np.ndarray,
                 colour: np.ndarray, gum: np.ndarray, sign: int) -> np.ndarray:
    """One row of teeth as RGBA over the box: crowns reaching `show` mm from the gum line
    `line` (reference y per column) into the mouth, downwards for the upper row (sign +1),
    upwards for the lower (-1), with gums on the other side of the line."""
    x0, y0, x1, y1 = box
    f, w = rig.frame, rig.frame.mouth_width
    mm = w / MOUTH_MM
    xs = np.arange(x0, x1, dtype=np.float32)
    ys = np.arange(y0, y1, dtype=np.float32)[:, None]
    lat = ((xs - f.mouth_center[0]) * f.right[0] + (line - f.mouth_center[1]) * f.right[1]) / (w / 2)
    tooth, across, px, facing, exists = _tooth_layout(lat, widths, w)
    c = 2 * across - 1  # -1..1 across each crown
    # Crown outline, away from the lip line: rounded corners; the canine comes to a point.
    reach = show[tooth] * (0.55 + 0.45 * facing) * mm
    corner = np.clip(1 - np.sqrt(np.clip(1 - c**2, 0, 1)), 0, 1) * 1.4 * mm
    reach = reach - np.where(tooth == 2, 0.9 * np.abs(c) * mm, corner)
    gum_edge = (2.4 * np.sqrt(np.clip(1 - c**2, 0, 1)) - 1.0) * mm * (0.5 + 0.5 * facing)  # scalloped margin
    depth = (ys - line[None, :]) * sign  # px away from the lip line, into the mouth
    crown = np.clip(reach[None, :] - depth + 0.5, 0, 1) * exists[None, :]
    on_gum = np.clip(-gum_edge[None, :] - depth + 0.5, 0, 1)  # behind the lip, above the crown
    # Shading: each crown is convex (brighter in its middle), the gaps between teeth are
    # dark, teeth further round the arch turn away and darken; the crown darkens and warms
    # towards the gum and turns translucent (greyer) at its tip.
    gap = np.minimum(across, 1 - across) * px
    separation = 1 - 0.38 * np.exp(-((gap / 0.55) ** 2))
    convex = 0.9 + 0.1 * np.sqrt(np.clip(1 - c**2, 0, 1))
    turn = 0.3 + 0.7 * facing**1.6
    shade = (separation * convex * turn)[None, :]
    t = np.clip(depth / np.maximum(reach[None, :], 1), 0, 1)
    shade = shade * (0.93 + 0.07 * np.sin(np.pi * np.clip(t * 0.9 + 0.1, 0, 1)))
    rgb = colour[None, None, :] * shade[..., None]
    tip = np.clip((t - 0.8) / 0.2, 0, 1)[..., None] * 0.15
    rgb = rgb * (1 - tip) + (rgb.mean(-1, keepdims=True) * np.array([0.9, 0.92, 0.96], np.float32)) * tip
    gum_rgb = gum[None, None, :] * (turn[None, :, None] * (0.9 + 0.1 * convex[None, :, None]))
    rgb = np.where(on_gum[..., None] > 0, gum_rgb * on_gum[..., None] + rgb * (1 - on_gum[..., None]), rgb)
    alpha = np.maximum(crown, on_gum * exists[None, :])
    return np.dstack([rgb, alpha]).astype(np.float32)


def _synthetic_atlas(rig: FaceRig, box: Box, lip: np.ndarray, skin: np.ndarray, bright: float) -> TeethAtlas:
    x0, y0, x1, y1 = box
    w = rig.frame.mouth_width
    xs = np.arange(x0, x1, dtype=np.float32)
    upper_line = _curve(rig.lm[UPPER_INNER], xs)
    lower_top = _curve(rig.lm[LOWER_INNER], xs) + LOWER_HIDE * w  # the tips, behind the lower lip
    lower_gum = lower_top + LOWER_SHOW[0] * w / MOUTH_MM
    # Colours from the portrait: teeth no brighter than its bright skin, a little warmer
    # than ivory where the light is warm; gums and cavity from the lips.
    skin_luma = float(skin @ LUMA)
    teeth_luma = min(bright * 1.02, max(skin_luma * 1.18, 60.0), 235.0)
    cast = skin / max(skin_luma, 1.0)
    chroma = 0.8 * IVORY + 0.2 * cast
    teeth = chroma / float(chroma @ LUMA) * teeth_luma
    lip_luma = max(float(lip @ LUMA), 1.0)
    gum = np.clip(lip * np.array([1.02, 0.78, 0.82], np.float32) * min(1.0, 1.15 * skin_luma / lip_luma), 0, 255)
    red = lip / lip_luma * np.array([1.25, 0.8, 0.85], np.float32)
    cavity = np.stack([red * 0.34 * lip_luma, red * 0.15 * lip_luma])
    tongue = lip * np.array([0.92, 0.66, 0.7], np.float32)
    upper = _teeth_layer(rig, box, upper_line, UPPER_WIDTHS, UPPER_SHOW, teeth, gum, +1)
    lower = _teeth_layer(rig, box, lower_gum, LOWER_WIDTHS, LOWER_SHOW, teeth * 0.86, gum * 0.8, -1)
    return TeethAtlas(upper, lower, True, cavity.astype(np.float32), tongue.astype(np.float32),
                      lower_top.astype(np.float32), LOWER_FOLLOW)


# --- per frame --------------------------------------------------------------------------
def composite(
    frame: np.ndarray, rig: FaceRig, atlas: TeethAtlas, box: Box, disp: np.ndarray, jaw: np.ndarray
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
    mask = np.zeros((sy1 - sy0, sx1 - sx0), np.uint8)
    cv2.fillPoly(mask, [np.round((poly - (sx0, sy0)) * 4).astype(np.int32)], 255, cv2.LINE_AA, shift=2)
    if not mask.any():
        return
    xs = np.arange(x0 + sx0, x0 + sx1, dtype=np.float32)
    top, bottom = _curve(up, xs), _curve(low, xs)
    ys = np.arange(y0 + sy0, y0 + sy1, dtype=np.float32)[:, None]
    paint = _synthetic if atlas.synthetic else _own_teeth
    interior = paint(rig, atlas, box, (sx0, sy0, sx1, sy1), xs, ys, top, bottom, up, jaw)
    # shut lips overlap (the closure pulls them past each other): nothing shows between them
    parted = np.clip(bottom - top, 0, 1)[None, :]
    m = (mask.astype(np.float32) / 255 * parted)[..., None]
    target = frame[y0 + sy0:y0 + sy1, x0 + sx0:x0 + sx1]
    target[:] = (target.astype(np.float32) * (1 - m) + interior * m).astype(np.uint8)


def _seam(frame: np.ndarray, rig: FaceRig, atlas: TeethAtlas, up: np.ndarray, low: np.ndarray) -> None:
    """Where the lips meet (or nearly), a thin line darker than the lips, as shut lips show:
    it covers what the warp squeezed between them of a photo's parted lips and teeth."""
    assert atlas.seam is not None  # build_atlas always sets it
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


def _lower_teeth(atlas: TeethAtlas, sub: Box, shift: np.ndarray) -> np.ndarray:
    sx0, sy0, sx1, sy1 = sub
    gx, gy = np.meshgrid(np.arange(sx0, sx1, dtype=np.float32), np.arange(sy0, sy1, dtype=np.float32))
    return cv2.remap(atlas.lower, gx - shift[0], gy - shift[1], cv2.INTER_LINEAR, borderValue=0)


def _own_teeth(
    rig: FaceRig, atlas: TeethAtlas, box: Box, sub: Box, xs: np.ndarray, ys: np.ndarray,
    top: np.ndarray, bottom: np.ndarray, up: np.ndarray, jaw: np.ndarray,
) -> np.ndarray:
    """The portrait's own teeth over a plain cavity; the lower row lags the lower lip a little
    (LOWER_FOLLOW) so the opening shows the cavity, not a lip-wide band of teeth."""
    sx0, sy0, sx1, sy1 = sub
    depth = np.clip((ys - top) / np.maximum(bottom - top, 1.0), 0, 1)
    above = ys < (top + bottom) / 2
    lower = _lower_teeth(atlas, sub, jaw * LOWER_FOLLOW)
    teeth = np.where(above[..., None], atlas.upper[sy0:sy1, sx0:sx1], lower)
    tongue = np.clip((depth - 0.55) / 0.45, 0, 1)[..., None]
    cavity = CAVITY_TOP + (CAVITY_TONGUE - CAVITY_TOP) * tongue
    alpha = teeth[..., 3:4]
    interior = teeth[..., :3] * alpha + cavity * (1 - alpha)
    opening = np.clip((bottom - top) / (0.25 * rig.frame.mouth_width), 0, 1)
    lip_shadow = 0.55 + 0.45 * np.sin(np.pi * depth) ** 0.5 * (0.4 + 0.6 * opening)
    return interior * lip_shadow[..., None]


def _synthetic(
    rig: FaceRig, atlas: TeethAtlas, box: Box, sub: Box, xs: np.ndarray, ys: np.ndarray,
    top: np.ndarray, bottom: np.ndarray, up: np.ndarray, jaw: np.ndarray,
) -> np.ndarray:
    """Back to front: cavity, tongue, lower teeth, upper teeth; then the lips' shadows."""
    # a synthetic atlas always carries these (_synthetic_atlas)
    assert atlas.cavity is not None and atlas.tongue is not None and atlas.lower_top is not None
    sx0, sy0, sx1, sy1 = sub
    w = rig.frame.mouth_width
    left, right = min(up[0, 0], up[-1, 0]), max(up[0, 0], up[-1, 0])
    lat = (xs - (left + right) / 2) / max((right - left) / 2, 1.0)  # -1..1 between the corners
    side = np.clip(1 - lat**2, 0, 1)
    gap = np.maximum(bottom - top, 1.0)
    # The cavity: lit a little just inside the lips, dark deep inside and at the corners.
    near = np.minimum(ys - top, bottom - ys) / (0.06 * w)
    lit = np.exp(-np.clip(near, 0, None)) * (0.35 + 0.65 * side)
    interior = atlas.cavity[1] + (atlas.cavity[0] - atlas.cavity[1]) * lit[..., None]
    interior *= (0.45 + 0.55 * np.sqrt(side))[None, :, None]
    # The tongue lies behind the lower teeth: a dome, highest in the middle.
    shift = jaw * atlas.lower_follow
    rest = np.interp(xs - shift[0], np.arange(atlas.lower_top.size, dtype=np.float32) + box[0],
                     atlas.lower_top) + shift[1]  # where the lower teeth's tips are now
    dome = np.clip(1 - (lat / 0.85) ** 2, 0, 1)
    tongue_top = rest - 0.1 * w * np.sqrt(dome) + 0.06 * w * (1 - dome)
    below = np.clip(ys - tongue_top + 0.5, 0, 1) * (dome > 0)
    front = np.clip((ys - tongue_top) / (0.08 * w), 0, 1)  # its top edge lies furthest back
    tongue_shade = (0.4 + 0.5 * front * (2 - front)) * (0.45 + 0.55 * np.sqrt(dome))
    tongue = atlas.tongue * tongue_shade[..., None]
    interior += (tongue - interior) * below[..., None]
    # Teeth: the lower row moves with the jaw (a little less than the lower lip), then the upper.
    lower = _lower_teeth(atlas, sub, shift)
    interior += (lower[..., :3] - interior) * lower[..., 3:4]
    upper = atlas.upper[sy0:sy1, sx0:sx1]
    interior += (upper[..., :3] - interior) * upper[..., 3:4]
    # The upper lip shades what lies just under it, the lower lip a little; a narrow
    # opening lets in less light.
    opening = np.clip(gap / (0.22 * w), 0, 1)
    under_upper = np.exp(-np.clip(ys - top, 0, None) / (0.05 * w))
    over_lower = np.exp(-np.clip(bottom - ys, 0, None) / (0.03 * w))
    shadow = (1 - 0.42 * under_upper) * (1 - 0.3 * over_lower) * (0.72 + 0.28 * opening)
    return interior * shadow[..., None]
