"""mediapipe face mesh over a stream of frames (tracking mode: it follows the face
from frame to frame, far cheaper than detecting it anew on each)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from engine.families.portrait.rig_fit import mouth_opening

POINTS = 468  # the mesh without the iris points: what the rig and the fit use


class FaceTracker:
    """Landmarks of the largest face per frame, and how many faces were seen."""

    def __init__(self, max_faces: int = 1):
        import mediapipe as mp  # heavy: loaded only by what tracks faces

        self._mesh = mp.solutions.face_mesh.FaceMesh(
            static_image_mode=False, refine_landmarks=False, max_num_faces=max_faces,
            min_detection_confidence=0.5, min_tracking_confidence=0.5)

    def __call__(self, rgb: np.ndarray) -> list[np.ndarray]:
        """Every face found, largest first, as (468, 2) pixel coordinates."""
        result = self._mesh.process(np.ascontiguousarray(rgb))
        h, w = rgb.shape[:2]
        faces = [np.array([(p.x * w, p.y * h) for p in face.landmark[:POINTS]], np.float32)
                 for face in result.multi_face_landmarks or []]
        return sorted(faces, key=lambda f: -float(np.ptp(f[:, 1])))

    def close(self) -> None:
        self._mesh.close()

    def __enter__(self) -> FaceTracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FaceCounter:
    """Faces in a frame by mediapipe's full-range face detector. The mesh in tracking mode
    follows one face well, but asked for two it invents a second one beside the first; and
    it misses a face far from the camera that this detector still finds."""

    def __init__(self, min_area: float = 0.25):
        import mediapipe as mp

        self._detector = mp.solutions.face_detection.FaceDetection(model_selection=1, min_detection_confidence=0.6)
        self.min_area = min_area  # a second face counts when at least this share of the first's area

    def __call__(self, rgb: np.ndarray) -> list[float]:
        """The heights (pixels) of the faces found, largest first; a face much smaller than
        the largest is left out (a photo on the wall, a face in the crowd)."""
        found = self._detector.process(np.ascontiguousarray(rgb)).detections or []
        boxes = sorted(((d.location_data.relative_bounding_box.width * rgb.shape[1],
                         d.location_data.relative_bounding_box.height * rgb.shape[0]) for d in found),
                       key=lambda b: -b[0] * b[1])
        return [h for w, h in boxes if w * h >= self.min_area * boxes[0][0] * boxes[0][1]]

    def tiled(self, rgb: np.ndarray) -> list[float]:
        """As __call__, over overlapping half-size tiles: the detector sees at 192 pixels, so
        a face 60 pixels tall in a 1080p frame is found only in a tile of it."""
        h, w = rgb.shape[:2]
        heights: list[float] = []
        for y in (0, h // 4, h // 2):
            for x in (0, w // 4, w // 2):
                heights += self(rgb[y:y + h // 2, x:x + w // 2])
        return sorted(heights, reverse=True)

    def close(self) -> None:
        self._detector.close()


def track_landmarks(frames: Iterable[np.ndarray]) -> np.ndarray:
    """(T, 468, 2) pixel landmarks of the one face per frame; NaN where none is found."""
    out = []
    with FaceTracker() as tracker:
        for rgb in frames:
            faces = tracker(rgb)
            out.append(faces[0] if faces else np.full((POINTS, 2), np.nan, np.float32))
    return np.stack(out) if out else np.zeros((0, POINTS, 2), np.float32)


def frames_opening(frames: Iterable[np.ndarray]) -> np.ndarray:
    """mouth_opening of RGB frames (0 where no face is found)."""
    return mouth_opening(np.nan_to_num(track_landmarks(frames)))
