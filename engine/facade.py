"""What the server knows of the model families: avatar files, the latent layout, the
motion's picture delay, and the error code of a failed avatar. The server imports these
from here, never from `engine.families` (tests/unit/test_layout.py), so a family's
insides can move without touching the server."""

from engine.families.latent.config import MODEL_LAYOUT, missing_parts
from engine.families.motion.delay import picture_delay_frames
from engine.families.portrait.avatar import DEFAULT_AVATAR, NoFaceError, cache_path, prepare_upload
from engine.families.portrait.scene import scene_path
from engine.families.video.clip import SUFFIXES as CLIP_UPLOAD_SUFFIXES
from engine.families.video.reference import SUFFIX as CLIP_SUFFIX
from engine.families.video.reference import StaleReference, check_format, is_video_avatar

__all__ = ["CLIP_SUFFIX", "CLIP_UPLOAD_SUFFIXES", "DEFAULT_AVATAR", "MODEL_LAYOUT", "NoFaceError", "StaleReference",
           "cache_path", "check_format", "failure_code", "is_video_avatar", "missing_parts", "picture_delay_frames",
           "prepare_upload", "scene_path"]


def failure_code(exc: BaseException) -> str:
    """The error code of an avatar that failed to load: a face that cannot be used, or the engine's."""
    return "bad_avatar" if isinstance(exc, NoFaceError) else "engine_error"
