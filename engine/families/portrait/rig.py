"""How motion coefficients move the portrait's face landmarks (a linear 2D face rig).

Every coefficient becomes a basis of control-point displacements, in pixels of the
reference; a frame's displacement is the closure term plus the coefficient-weighted
sum of the bases. The rig is linear so the renderer can precompute dense fields.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core import motion

UPPER_INNER = [78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308]
LOWER_INNER = [78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308]
UPPER_OUTER = [61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291]
LOWER_OUTER = [61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291]
# Eyes, paired upper/lower lid points; "r" is the subject's right (image left).
EYE_R_UPPER, EYE_R_LOWER = [246, 161, 160, 159, 158, 157, 173], [7, 163, 144, 145, 153, 154, 155]
EYE_L_UPPER, EYE_L_LOWER = [466, 388, 387, 386, 385, 384, 398], [249, 390, 373, 374, 380, 381, 382]
EYE_R_CREASE = ([247, 30, 29, 27, 28, 56, 190], [113, 225, 224, 223, 222, 221, 189])
EYE_L_CREASE = ([467, 260, 259, 257, 258, 286, 414], [342, 445, 444, 443, 442, 441, 413])
EYE_CORNERS = [33, 133, 263, 362]
BROWS = [70, 63, 105, 66, 107, 46, 53, 52, 65, 55, 300, 293, 334, 296, 336, 276, 283, 282, 295, 285]
JAW = [132, 58, 172, 136, 150, 149, 176, 148, 152, 377, 400, 378, 379, 365, 397, 288, 361,
       175, 199, 200, 18, 83, 313, 201, 421, 208, 428, 32, 262, 171, 396, 140, 369, 43, 273, 106, 335,
       182, 406, 204, 424, 57, 287]
ANCHORS = [10, 151, 9, 8, 168, 6, 197, 195, 5, 4, 1, 2, 98, 327, 50, 280, 101, 330, 123, 352,
           234, 454, 93, 323, 127, 356, 162, 389, 21, 251, 54, 284, 103, 332, 67, 297, 109, 338,
           205, 425, 36, 266, 142, 371, 164, 167, 393]
LIPS = sorted(set(UPPER_INNER + LOWER_INNER + UPPER_OUTER + LOWER_OUTER))
PERIORAL = [57, 287, 43, 273, 106, 335, 204, 424, 182, 406]  # the skin around the corners
EYES = EYE_R_UPPER + EYE_R_LOWER + EYE_L_UPPER + EYE_L_LOWER + EYE_CORNERS
CREASES = [i for ring in EYE_R_CREASE + EYE_L_CREASE for i in ring]
JAW_OPEN = motion.INDEX["jaw_open"]
PARTING = 1  # the parting's row in FaceRig.terms and its weight's place in FaceRig.weights
CONTROL = sorted(set(LIPS + EYES + CREASES + BROWS + JAW + ANCHORS))

JAW_DROP = 0.38     # lower-lip travel at jaw_open=1, in mouth widths: the unit of jaw_open, in
# which rig_fit reads real footage (the motion model's training labels)
DRAWN = 0.84  # a portrait draws this share of it. With real inner mouths (mouth_interior.py)
# mediapipe reads the same lips as parted further than over the old dark slot: at 1.0 the spread
# was 1.43x real people's (training/motion/judge.py); at 0.84, 1.31x
DRAWN_JAW = 1.3  # a portrait draws jaw_open's rise beyond motion.SHUT at this scale, and shut lips
# at or below it (where the motion stage keeps lips shut). Drawn from 0 at full scale, the shut
# range already parted the lips (mediapipe: 0.081 eye distances at jaw 0.1 against 0.044 at 0),
# so every quiet syllable showed a slit and the spread was 1.31x real people's, the peaks 1.37x
# (training/motion/judge.py, four held-out speakers). Drawn from SHUT at 0.75: correlation with
# the real mouth 0.482 -> 0.523, spread 0.88x, peaks 1.11x. The jaw now drops further than the
# lips part (UPPER_FOLLOW), hence 1.3: spread 0.94x, peaks 1.13x, the other GRID speakers' peaks
# 1.92x (at 1.45 with the upper teeth shown: 2.12x; docs/motion.md)
RELEASE_RATE = 2.5  # jaw_open at which the closure has fully released is 1 / this
CORNER_SAG = 0.4  # the lower lip near the corners drops this much less than at the middle
CLOSE_OVERLAP = 0.6  # each inner lip travels this share of the gap: they overlap a little, so
# the warp's grid leaves no line of the reference's teeth between closed lips
CLOSE_OUTER = 0.7  # share of the lip closure that the outer lip contour follows: mostly whole
# lips move to meet. At 0.35 the inner edges stretched towards each other and mediapipe read the
# default portrait's shut mouth as parted (0.078 eye distances; 0.7: 0.052; real shut mouths
# 0.01-0.04). At 1.0 (0.044) the open/shut lip thickness fell to 1.053 (training/motion/judge.py)
UPPER_FOLLOW = 0.6  # the upper inner lip comes down this share of the jaw's drop: in speech the
# jaw drops further than the lips part and the upper lip, relaxed, covers the upper teeth and
# shows more of itself. Lifted instead (0.06 of the drop upwards), a speaking mouth was a fixed
# grin whose lips mediapipe read no thicker open than shut (x1.028; real people x1.103, four
# held-out speakers, training/motion/judge.py); at 0.6 x1.100 (with DRAWN_JAW 1.3, and a photo's
# own upper teeth coming half the lip's way down, mouth_interior.UPPER_TEETH_FOLLOW)
PERIORAL_FOLLOW = 0.7  # the skin around the corners follows this share of their sideways travel
# when the lips round or spread. With the lips alone moving, the warp squeezed the skin beside
# them and mediapipe read a rounded mouth (lip_round 1, shut) no narrower (0.677 -> 0.685 eye
# distances); with it and PUCKER 0, 0.636 (the judge's mouth_measures; docs/motion.md "Shape")
PUCKER = 0.0  # how far rounding pushes the outer lip contours apart, in mouth widths. Drawn at the
# read value (READ_PUCKER) a rounded mouth read as parted (0.044 -> 0.083 at lip_round 1, shut)
# and the rendered opening followed real mouths less
READ_PUCKER = 0.05  # how real footage is read (rig_fit): the unit lip_round's labels were fitted in
READ_UPPER_FOLLOW = -0.06  # how real footage is read (rig_fit): the upper lip rises a little as
# the jaw drops, so jaw_open keeps the unit the motion model's labels were fitted in
REST_GAP = 0.16  # the inner lips' gap at their middle, in mouth widths, from which every portrait's
# released mouth opens: the default portrait's own (0.163, a smile showing teeth). Released to its
# own closed lips, a photo's mouth opened by the jaw's net drop alone (1 - UPPER_FOLLOW of it) and
# barely parted: mediapipe read 0.0066 eye distances of spread on a closed-lip upload against the
# default's 0.032 (issue 59). A photo whose lips part wider keeps its own gap
LIP_SWELL = 0.25  # real lips get thicker as they part (x1.04-1.17 between shut and open frames,
# measured by training/motion/judge.py on held-out speakers): the outer contours travel this
# share of the drop further than the inner ones, the lower lip down and the upper lip up


@dataclass(frozen=True)
class FaceFrame:
    """Axes and scale of one portrait's face."""

    mouth_center: np.ndarray
    mouth_width: float
    down: np.ndarray   # unit vector from between the eyes to the chin
    right: np.ndarray  # unit vector towards the image right
    chin_depth: float  # distance from mouth centre to chin along `down`
    half_width: float  # half the face width at mouth height

    @classmethod
    def of(cls, lm: np.ndarray) -> FaceFrame:
        centre = (lm[13] + lm[14]) / 2
        eyes = (lm[33] + lm[263]) / 2
        down = (lm[152] - eyes) / np.linalg.norm(lm[152] - eyes)
        right = np.array([-down[1], down[0]], np.float32)
        return cls(
            mouth_center=centre,
            mouth_width=float(np.linalg.norm(lm[291] - lm[61])),
            down=down.astype(np.float32),
            right=right,
            chin_depth=float((lm[152] - centre) @ down),
            half_width=float(abs((lm[454] - lm[234]) @ right) / 2),
        )


class FaceRig:
    """Control points of one portrait and the displacement basis of each coefficient."""

    def __init__(self, landmarks: np.ndarray, drawn: float = DRAWN, upper_follow: float = UPPER_FOLLOW,
                 rest_gap: float = REST_GAP, pucker: float = PUCKER):
        self.lm = landmarks.astype(np.float32)
        self.drawn, self.upper_follow, self.rest_gap, self.pucker = drawn, upper_follow, rest_gap, pucker
        self.frame = FaceFrame.of(self.lm)
        self.index = {lm_id: row for row, lm_id in enumerate(CONTROL)}
        self.points = self.lm[CONTROL]
        self.closure = self._closure()
        self.jaw_only = self._jaw()  # kept apart: the lower teeth follow the jaw alone
        self.part = self._part()
        self.bases = np.zeros((motion.DIM, len(CONTROL), 2), np.float32)
        for name, basis in self._mouth_bases().items():
            self.bases[motion.INDEX[name]] = basis
        self.bases[motion.INDEX["jaw_open"]] = self.jaw_only
        self.bases[motion.INDEX["blink_r"]] = self._blink(EYE_R_UPPER, EYE_R_LOWER, EYE_R_CREASE)
        self.bases[motion.INDEX["blink_l"]] = self._blink(EYE_L_UPPER, EYE_L_LOWER, EYE_L_CREASE)
        self.bases[motion.INDEX["brow"]] = self._brow()
        # (2 + DIM, C, 2): the closure, the parting, then each coefficient's basis. A frame weighs
        # them by `weights`, so whatever is linear in the displacement can be precomputed per term
        self.terms = np.concatenate([self.closure[None], self.part[None], self.bases])

    def as_drawn(self, coeffs: np.ndarray) -> np.ndarray:
        """The coefficients as this portrait draws them: the jaw from SHUT, at DRAWN_JAW."""
        out = coeffs.copy()
        out[JAW_OPEN] = max(float(coeffs[JAW_OPEN]) - motion.SHUT, 0.0) * DRAWN_JAW
        return out

    def weights(self, coeffs: np.ndarray) -> np.ndarray:
        """Each term's weight for one motion frame (drawn coefficients).

        The closure fades as the jaw opens and the parting comes in: a speaking mouth
        shows the upper teeth the way the reference shows them, rather than keeping them
        under the lip, and starts from at least REST_GAP whatever the photo's lips did.
        """
        release = min(1.0, max(0.0, float(coeffs[JAW_OPEN]) * RELEASE_RATE))
        return np.concatenate([[1 - release, release], coeffs]).astype(np.float32)

    def displacement(self, coeffs: np.ndarray) -> np.ndarray:
        """Control-point displacements (C, 2) for one motion frame."""
        return np.tensordot(self.weights(coeffs), self.terms, axes=1)

    # --- bases -----------------------------------------------------------------
    def _zeros(self) -> np.ndarray:
        return np.zeros((len(CONTROL), 2), np.float32)

    def _set(self, out: np.ndarray, ids: list[int], vectors: np.ndarray) -> None:
        for lm_id, vec in zip(ids, vectors):
            out[self.index[lm_id]] += vec

    def _lateral(self, ids: list[int]) -> np.ndarray:
        """Signed horizontal offset of each point from the mouth centre, in half mouth widths."""
        f = self.frame
        return ((self.lm[ids] - f.mouth_center) @ f.right) / (f.mouth_width / 2)

    def _closure(self) -> np.ndarray:
        """Brings the reference's parted inner lips together: the neutral mouth is closed."""
        out = self._zeros()
        gap = ((self.lm[LOWER_INNER] - self.lm[UPPER_INNER]) @ self.frame.down).clip(0)[:, None]
        half = CLOSE_OVERLAP * gap * self.frame.down
        self._set(out, UPPER_INNER[1:-1], half[1:-1])
        self._set(out, LOWER_INNER[1:-1], -half[1:-1])
        self._set(out, UPPER_OUTER[1:-1], CLOSE_OUTER * half[1:-1])
        self._set(out, LOWER_OUTER[1:-1], -CLOSE_OUTER * half[1:-1])
        return out

    def _jaw(self) -> np.ndarray:
        f = self.frame
        drop = JAW_DROP * self.drawn * f.mouth_width * f.down
        out = self._zeros()
        rel = self.points - f.mouth_center
        depth = (rel @ f.down) / f.chin_depth
        side = np.abs(rel @ f.right) / f.half_width
        weight = np.clip(depth * 1.4, 0, 1.15) * np.clip(1 - side**2, 0, 1)
        weight[[self.index[i] for i in ANCHORS + EYES + CREASES + BROWS]] = 0
        out += weight[:, None] * drop
        # The lower lip hangs from the corners: it drops most at the middle and less towards
        # them, so the opening is an oval rather than a box with straight sides.
        lips_low = [i for i in LOWER_INNER + LOWER_OUTER if i not in (61, 291, 78, 308)]
        lat = np.clip(np.abs(self._lateral(lips_low)), 0, 1)
        for lm_id, share, swell in zip(lips_low, 1 - CORNER_SAG * lat**2, 1 - lat**2):
            out[self.index[lm_id]] = share * drop * (1 + LIP_SWELL * swell * (lm_id in LOWER_OUTER))
        for lm_id in (61, 291, 78, 308):
            out[self.index[lm_id]] = 0.45 * drop
        self._set(out, UPPER_INNER[1:-1], np.tile(self.upper_follow * drop, (9, 1)))
        swell_up = 1 - np.clip(np.abs(self._lateral(UPPER_OUTER[1:-1])), 0, 1) ** 2
        self._set(out, UPPER_OUTER[1:-1], (self.upper_follow - LIP_SWELL * swell_up)[:, None] * drop)
        return out

    def _part(self) -> np.ndarray:
        """Drops the lower lip, and the jaw under it, by what the photo's inner gap lacks of
        `rest_gap` at the middle: the jaw's own shape (an oval opening), the upper lip and the
        corners kept."""
        f = self.frame
        mid = self.index[14]
        gap = float((self.lm[14] - self.lm[13]) @ f.down)
        missing = max(self.rest_gap * f.mouth_width - gap, 0.0)
        out = self.jaw_only * (missing / float(self.jaw_only[mid] @ f.down))
        out[[self.index[i] for i in UPPER_INNER + UPPER_OUTER]] = 0  # corners too: dropped, they
        # bent the upper lip's ends down into hooks
        return out

    def _mouth_bases(self) -> dict[str, np.ndarray]:
        f, w = self.frame, self.frame.mouth_width
        ids = LIPS
        lat = self._lateral(ids)[:, None]
        centre = np.clip(1 - np.abs(lat), 0, 1) ** 0.7
        upper = np.array([i in UPPER_INNER + UPPER_OUTER for i in ids])[:, None]
        outer = np.array([i in UPPER_OUTER + LOWER_OUTER for i in ids])[:, None]
        vert = np.where(upper, -1.0, 1.0)
        bases = {name: self._zeros() for name in ("lip_width", "lip_round", "upper_lip", "lower_lip", "smile")}
        self._set(bases["lip_width"], ids, 0.12 * w * lat * f.right)
        round_v = -0.12 * w * lat * f.right + self.pucker * w * centre * vert * outer * f.down
        self._set(bases["lip_round"], ids, round_v)
        side = np.sign(self._lateral(PERIORAL))[:, None] * PERIORAL_FOLLOW * 0.12 * w * f.right
        self._set(bases["lip_width"], PERIORAL, side)
        self._set(bases["lip_round"], PERIORAL, -side)
        self._set(bases["upper_lip"], ids, -0.09 * w * centre * upper * f.down)
        self._set(bases["lower_lip"], ids, 0.09 * w * centre * ~upper * f.down)
        corner = np.clip(np.abs(lat), 0, 1) ** 2
        self._set(bases["smile"], ids, -0.08 * w * corner * f.down + 0.03 * w * lat * corner * f.right)
        return bases

    def _blink(self, upper: list[int], lower: list[int], crease: tuple[list[int], list[int]]) -> np.ndarray:
        out = self._zeros()
        gap = ((self.lm[lower] - self.lm[upper]) @ self.frame.down).clip(0)[:, None] * self.frame.down
        self._set(out, upper, 0.92 * gap)
        self._set(out, lower, -0.08 * gap)
        self._set(out, crease[0], 0.55 * gap)
        self._set(out, crease[1], 0.2 * gap)
        return out

    def _brow(self) -> np.ndarray:
        out = self._zeros()
        lift = -0.07 * self.frame.mouth_width * self.frame.down
        self._set(out, BROWS, np.tile(lift, (len(BROWS), 1)))
        crease = EYE_R_CREASE[1] + EYE_L_CREASE[1]
        self._set(out, crease, np.tile(0.4 * lift, (len(crease), 1)))
        return out
