"""The idle walk: a path through the clip's own frames that never visibly loops or jumps.

The clip plays on frame by frame; every few seconds, and always before its segment ends
(the clip's end, a shot cut, or a leap where two takes were joined), the walk moves to
another moment whose head pose and eyes match the current one (the jump table, built
once when the avatar is prepared) and cross-fades into it over FADE frames, both
moments playing on meanwhile. Which moment, and when, is drawn from the session's
seed, so no two stretches repeat in step. The state is four integers and a generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.config import FPS
from engine.core import motion
from engine.families.portrait.rig_fit import STABLE

FADE = 8  # frames of cross-fade across a move
MIN_GAP = 2 * FPS  # a move goes at least this far along the clip (a shorter one reads as a stutter)
WAIT_S = (3.0, 9.0)  # seconds between wished-for moves
CANDIDATES = 10
SPREAD = FPS  # frames between any two candidates of one frame
REVISIT_PX = 6.0
RECENT = 8  # moves remembered, so the walk does not land again where it just was
BLINK_PX = 12.0  # a jump between open and shut eyes costs as much as this many pixels of head travel
SCENE_PX = 1000.0  # a move into another shot costs this much: taken only when nothing else is left
MIN_RUN = FPS  # a landing place has 2 of these to play before its segment ends; the last one is urgent
BREAK_PX, BREAK_STEPS = 3.0, 7.0  # a head move over both this many pixels and times the median is a leap
ROWS = 512  # distance rows computed at a time: a 5-minute clip's full matrix would be 225 MB


def pose_features(landmarks: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """Per frame: the points the mouth does not move, in pixels, and the eyelids."""
    points = landmarks[:, STABLE].reshape(len(landmarks), -1) / np.sqrt(len(STABLE))
    blink = coeffs[:, [motion.INDEX["blink_l"], motion.INDEX["blink_r"]]] * BLINK_PX / np.sqrt(2)
    return np.hstack([points, blink]).astype(np.float32)


def segment_ends(segment: np.ndarray) -> np.ndarray:
    """For every frame, the last frame of its segment (a stretch the walk may play through)."""
    change = np.flatnonzero(np.diff(segment))
    ends = np.append(change, len(segment) - 1)
    return ends[np.searchsorted(ends, np.arange(len(segment)))]


def head_steps(landmarks: np.ndarray) -> np.ndarray:
    """(T - 1,) the mean move of the head points (pixels) from each frame to the next."""
    return np.linalg.norm(np.diff(landmarks[:, STABLE], axis=0), axis=-1).mean(-1)


def segments(landmarks: np.ndarray, scene: np.ndarray) -> np.ndarray:
    """Segment ids: a new one at every shot cut and wherever the head leaps between two
    frames (takes joined into one upload): the walk never plays across either."""
    step = head_steps(landmarks)
    leap = step > max(BREAK_PX, BREAK_STEPS * float(np.median(step)) if len(step) else BREAK_PX)
    return np.concatenate([[0], np.cumsum(leap | (np.diff(scene) != 0))]).astype(np.int32)


def jump_table(landmarks: np.ndarray, coeffs: np.ndarray, scene: np.ndarray, segment: np.ndarray,
               k: int = CANDIDATES) -> tuple[np.ndarray, np.ndarray]:
    """For every frame, the k frames it may move to, best first, and the cost of each (the
    RMS head-point distance, averaged over the start and the end of the fade)."""
    feat = pose_features(landmarks, coeffs)
    n = len(feat)
    ends = segment_ends(segment)
    sq = (feat**2).sum(1)
    to, cost = np.zeros((n, k), np.int32), np.full((n, k), np.inf, np.float32)
    idx = np.arange(n)
    fade_end = np.minimum(idx + FADE, ends)  # where each side of a fade has got to when it ends
    # a landing place must leave its segment room to fade in and then play a while (less
    # where the takes are all short)
    room = ends - idx
    unusable = room < min(FADE + 2 * MIN_RUN, int(room.max()) // 2)
    for lo in range(0, n, ROWS):
        rows = idx[lo: lo + ROWS]
        d = _dist(feat[rows], sq[rows], feat, sq)
        d_end = _dist(feat[fade_end[rows]], sq[fade_end[rows]], feat[fade_end], sq[fade_end])
        d = (d + d_end) / 2 + SCENE_PX * (scene[rows][:, None] != scene[None])
        same = segment[rows][:, None] == segment[None]
        d[same & (np.abs(rows[:, None] - idx[None]) < MIN_GAP)] = np.inf  # never a short hop
        d[:, unusable] = np.inf
        for r, row in zip(rows, d):
            to[r], cost[r] = _spread_best(row, k)
    return to, cost


def _spread_best(row: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k cheapest frames of a row, no two within SPREAD of each other: the best few
    neighbours of one good frame would all lead back to the same second of the clip."""
    order = np.argsort(row)
    picked: list[int] = []
    for j in order[: 64 * k]:
        if not np.isfinite(row[j]):
            break
        if all(abs(int(j) - p) >= SPREAD for p in picked):
            picked.append(int(j))
            if len(picked) == k:
                break
    picked += [int(order[0])] * (k - len(picked))  # too few: repeat the best (its cost tells)
    return np.array(picked, np.int32), row[picked].astype(np.float32)


def _dist(a: np.ndarray, sa: np.ndarray, b: np.ndarray, sb: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(sa[:, None] + sb[None] - 2 * a @ b.T, 0))


def smooth_threshold(landmarks: np.ndarray) -> float:
    """The largest move cost that reads as no jump: three times the head's median travel per
    frame, and at least 2 pixels (spread over the FADE frames of a move, a quarter pixel each)."""
    step = np.sqrt(((np.diff(landmarks[:, STABLE], axis=0)) ** 2).sum(-1).mean(-1))
    return float(max(2.0, 3 * np.median(step)))


@dataclass
class WalkState:
    pos: int
    fade_from: int  # the moment faded out of (-1: no fade)
    fade_left: int
    wait: int  # frames until a move is wished for
    rng: np.random.Generator
    recent: np.ndarray  # (RECENT,) the last moves' landing frames (-inf: none yet)


class ClipWalk:
    """Advances a WalkState one output frame at a time."""

    def __init__(self, jump_to: np.ndarray, jump_cost: np.ndarray, scene: np.ndarray, segment: np.ndarray,
                 threshold: float):
        self.to, self.cost, self.threshold = jump_to, jump_cost, threshold
        self.last = segment_ends(segment) - FADE  # the latest frame each segment may be left from
        # Moves stay within a shot: start in the one with the most to walk through.
        self.home = scene == np.bincount(scene).argmax()

    def new_state(self, seed: int) -> WalkState:
        rng = np.random.default_rng(seed)
        room = np.flatnonzero(self.home & (self.last - np.arange(len(self.last)) >= MIN_RUN))
        start = int(rng.choice(room)) if len(room) else 0
        return WalkState(start, -1, 0, self._wait(rng), rng, np.full(RECENT, -10**9))

    def _wait(self, rng: np.random.Generator) -> int:
        return int(rng.uniform(*WAIT_S) * FPS)

    def step(self, s: WalkState) -> tuple[int, int, float]:
        """The next output frame: (frame, frame faded from or -1, weight of `frame`)."""
        s.pos += 1
        s.wait -= 1
        if s.fade_left > 0:
            s.fade_from += 1
            s.fade_left -= 1
        elif self._should_move(s):
            self._move(s)
        if s.fade_left == 0:
            return s.pos, -1, 1.0
        return s.pos, s.fade_from, 1 - s.fade_left / (FADE + 1)

    def _should_move(self, s: WalkState) -> bool:
        left = self.last[s.pos] - s.pos
        if left <= 0:
            return True
        # Near a segment's end a move is taken more readily, so the forced one is rarely needed.
        urgency = max(0.0, 1 - left / MIN_RUN)
        return (s.wait <= 0 or urgency > 0) and self.cost[s.pos, 0] <= self.threshold * (1 + 2 * urgency)

    def _move(self, s: WalkState) -> None:
        cost, to = self.cost[s.pos], self.to[s.pos]
        # The cheapest candidate, where landing again near a recent landing costs as much as a
        # jump of REVISIT_PX, and a small random share keeps equal choices from repeating.
        revisit = np.abs(to[:, None] - s.recent[None]).min(1) < 2 * MIN_GAP
        score = cost + REVISIT_PX * revisit + s.rng.uniform(0, self.threshold, len(cost))
        target = int(to[np.argmin(score)])
        s.recent = np.roll(s.recent, 1)
        s.recent[0] = target
        s.fade_from, s.pos, s.fade_left, s.wait = s.pos, target, FADE, self._wait(s.rng)
