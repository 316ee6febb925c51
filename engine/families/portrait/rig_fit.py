"""Fit the face rig's motion coefficients to tracked landmarks of a real person.

Per clip: every frame is aligned to the clip's own reference face by a similarity
transform on points the mouth does not move (forehead, nose, eyes, temples); the
transform gives the head pose, the aligned points everything else. The reference is
the median face over the clip's most closed-mouth frames, so the rig built on it
(engine/face_model.FaceRig, the very bases the renderer uses) starts closed and the
mouth coefficients are a bounded linear least-squares fit of its displacement bases
to the aligned lips and chin. Blinks come from the lid gaps against the clip's open
eye, the brow from its height over the eyes. A light 3-tap smoothing removes tracker
jitter without flattening syllables (a syllable spans 4-8 frames).

Head pose in the renderer's units: its yaw and pitch move the head sideways and down
by HEAD_TRAVEL face widths per radian (portrait_renderer), so those are the units of
the fitted translation; roll is the in-plane rotation.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import lsq_linear

from engine.core import motion
from engine.families.portrait.renderer import HEAD_TRAVEL
from engine.families.portrait.rig import (
    EYE_L_LOWER,
    EYE_L_UPPER,
    EYE_R_LOWER,
    EYE_R_UPPER,
    LOWER_OUTER,
    READ_PUCKER,
    READ_UPPER_FOLLOW,
    UPPER_OUTER,
    FaceRig,
)

STABLE = [10, 151, 9, 8, 168, 6, 197, 195, 5, 4, 1, 2, 98, 327, 234, 454, 127, 356, 162, 389, 21, 251,
          54, 284, 103, 332, 67, 297, 109, 338, 33, 133, 263, 362]
BROW_POINTS = [70, 63, 105, 66, 107, 300, 293, 334, 296, 336]
INNER_PAIRS = [(82, 87), (13, 14), (312, 317)]
OUTER = sorted(set(UPPER_OUTER + LOWER_OUTER))
SHAPE = [motion.INDEX[k] for k in ("lip_width", "lip_round", "smile")]
BOUNDS = {"jaw_open": (0.0, 1.3), "lip_width": (-1.0, 1.0), "lip_round": (0.0, 1.0), "smile": (-1.0, 1.0)}
RIDGE = 0.02  # keeps the near-collinear width/rounding pair from trading off frame to frame
CLOSED_SHARE = 0.2  # the most closed fifth of the frames makes the reference face


def mouth_opening(lm: np.ndarray) -> np.ndarray:
    """Inner-lip gap over the eye distance, per frame (T, 468+, 2) -> (T,): what the evaluation measures."""
    gap = np.mean([np.linalg.norm(lm[:, b] - lm[:, a], axis=-1) for a, b in INNER_PAIRS], 0)
    return gap / np.linalg.norm(lm[:, 263] - lm[:, 33], axis=-1)


def similarity(src: np.ndarray, dst: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Scale, angle and translation mapping src points onto dst (least squares, Umeyama)."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    a, b = src - mu_s, dst - mu_d
    cov = b.T @ a / len(a)
    u, sv, vt = np.linalg.svd(cov)
    d = np.sign(np.linalg.det(u @ vt))
    rot = u @ np.diag([1, d]) @ vt
    scale = float((sv * [1, d]).sum() / (a**2).sum() * len(a))
    return scale, float(np.arctan2(rot[1, 0], rot[0, 0])), mu_d - scale * rot @ mu_s


def _apply(points: np.ndarray, scale: float, angle: float, shift: np.ndarray) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return points @ (scale * np.array([[c, -s], [s, c]])).T + shift


def align(lm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames aligned to the clip's median stable face; per-frame (scale, angle) and stable centroid."""
    ref = lm[len(lm) // 2]
    for _ in range(2):  # align to a frame, then to the median of the aligned frames
        params = [similarity(f[STABLE], ref[STABLE]) for f in lm]
        aligned = np.stack([_apply(f, *p) for f, p in zip(lm, params)])
        ref = np.median(aligned, 0)
    pose = np.array([(s, a) for s, a, _ in params], np.float32)
    return aligned.astype(np.float32), pose, lm[:, STABLE].mean(1)


class ClipFit:
    """The rig of one clip's reference face and the fit of its mouth.

    The jaw comes straight from the inner-lip gap (above the clip's own closed gap), so
    the rendered mouth opens exactly as far as the real one in mouth widths; width,
    rounding and the corners are then a bounded least-squares fit of the rig's bases to
    the outer lip contour with the jaw's share taken out. The extra upper/lower lip
    coefficients stay 0: the tracker does not see a lip tuck reliably.
    """

    def __init__(self, aligned: np.ndarray):
        gap = inner_gap(aligned)
        self.closed_gap = float(np.quantile(gap, 0.03))
        self.reference = np.median(aligned[gap <= np.quantile(gap, CLOSED_SHARE)], 0)
        # real footage is read in jaw_open's own unit, with the upper lip as real ones move, and
        # from the face's own closed gap (no parting to a portrait's rest gap)
        self.rig = FaceRig(self.reference, drawn=1.0, upper_follow=READ_UPPER_FOLLOW, rest_gap=0.0,
                           pucker=READ_PUCKER)
        f = self.rig.frame
        # inner gap per unit of jaw_open: the lower lip drops JAW_DROP, the upper one rises a little
        self.gap_per_jaw = float((self.rig.jaw_only[self.rig.index[14]] - self.rig.jaw_only[self.rig.index[13]])
                                 @ f.down)
        self.rows = [self.rig.index[i] for i in OUTER]
        basis = self.rig.bases[SHAPE][:, self.rows].reshape(len(SHAPE), -1).T / f.mouth_width
        self.matrix = np.vstack([basis, np.sqrt(RIDGE) * np.eye(len(SHAPE))])
        self.bounds = tuple(np.array([BOUNDS[motion.COEFFS[k]][i] for k in SHAPE]) for i in (0, 1))

    def jaw(self, aligned: np.ndarray) -> np.ndarray:
        return np.clip((inner_gap(aligned) - self.closed_gap) / self.gap_per_jaw, *BOUNDS["jaw_open"])

    def shape(self, aligned: np.ndarray, jaw: np.ndarray) -> np.ndarray:
        """(T, 3) lip_width, lip_round, smile from the outer contour, the jaw's displacement removed."""
        jaw_disp = jaw[:, None, None] * self.rig.jaw_only[self.rows][None]
        disp = (aligned[:, OUTER] - self.reference[OUTER] - jaw_disp).reshape(len(aligned), -1)
        target = np.hstack([disp / self.rig.frame.mouth_width, np.zeros((len(aligned), len(SHAPE)))])
        return np.stack([lsq_linear(self.matrix, t, self.bounds, method="bvls").x for t in target])


def inner_gap(aligned: np.ndarray) -> np.ndarray:
    """Inner-lip gap in pixels of the aligned face, mean of three pairs across the mouth."""
    return np.mean([aligned[:, b, 1] - aligned[:, a, 1] for a, b in INNER_PAIRS], 0)


def _lid_gap(aligned: np.ndarray, upper: list[int], lower: list[int]) -> np.ndarray:
    return (aligned[:, lower, 1] - aligned[:, upper, 1]).mean(1)


def smooth(track: np.ndarray) -> np.ndarray:
    """3-tap binomial filter along time, edges kept."""
    out = track.copy()
    out[1:-1] = 0.25 * track[:-2] + 0.5 * track[1:-1] + 0.25 * track[2:]
    return out


def fill_gaps(lm: np.ndarray) -> np.ndarray:
    """Frames the tracker lost take the nearest tracked frame's landmarks."""
    ok = np.isfinite(lm[:, 0, 0])
    if ok.all():
        return lm
    idx = np.where(ok)[0]
    nearest = idx[np.abs(np.arange(len(lm))[:, None] - idx[None]).argmin(1)]
    return lm[nearest]


def fit_clip(landmarks: np.ndarray) -> np.ndarray:
    """(T, 468, 2) tracked landmarks -> (T, motion.DIM) rig coefficients (breath left at 0)."""
    lm = fill_gaps(landmarks.astype(np.float64))
    aligned, pose, centre = align(lm)
    fit = ClipFit(aligned)
    out = motion.zeros(len(lm))
    jaw = fit.jaw(aligned)
    out[:, motion.INDEX["jaw_open"]] = smooth(jaw)
    out[:, SHAPE] = smooth(fit.shape(aligned, jaw))
    for name, upper, lower in (("blink_r", EYE_R_UPPER, EYE_R_LOWER), ("blink_l", EYE_L_UPPER, EYE_L_LOWER)):
        gap = _lid_gap(aligned, upper, lower)
        out[:, motion.INDEX[name]] = np.clip((1 - gap / np.quantile(gap, 0.9)) / 0.92, 0, 1)
    f = fit.rig.frame
    brow = (aligned[:, [33, 263], 1].mean(1) - aligned[:, BROW_POINTS, 1].mean(1))
    out[:, motion.INDEX["brow"]] = smooth(np.clip((brow - np.median(brow)) / (0.07 * f.mouth_width), -1, 1))
    face_w = float(np.ptp(fit.reference[:, 0]))
    # the stable centroid's travel, in the reference's pixels (divide out the frame's scale)
    travel = (centre - np.median(centre, 0)) * pose[:, :1]
    out[:, motion.INDEX["head_yaw"]] = smooth(travel[:, 0] / (HEAD_TRAVEL * face_w))
    out[:, motion.INDEX["head_pitch"]] = smooth(travel[:, 1] / (HEAD_TRAVEL * face_w))
    roll = -pose[:, 1]
    out[:, motion.INDEX["head_roll"]] = smooth(roll - np.median(roll))
    return out.astype(np.float32)
