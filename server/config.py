"""Server configuration: one frozen dataclass, read once from AVATAR_* variables."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from engine.avatar import DEFAULT_AVATAR


def _default_workers() -> int:
    """One worker per NVIDIA device where there are any (seen without importing torch), else one."""
    return max(1, len(glob.glob("/dev/nvidia[0-9]*")))


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    avatar: Path = DEFAULT_AVATAR
    """Portrait used when a session names no avatar."""
    workers: int = field(default_factory=_default_workers)
    """Engine worker processes."""
    ice_servers: tuple[str, ...] = ()
    """STUN/TURN URLs. Empty by default: an unreachable server stalls ICE gathering for 5 s."""
    ice_username: str = ""
    ice_credential: str = ""
    lead_frames: int = 4
    """Frames rendered ahead of playout; adds lead x 40 ms of latency and absorbs render jitter."""
    video_bitrate: int = 1_200_000
    """Fixed H.264 bitrate; REMB changes would recreate the encoder (a keyframe each time)."""
    avatars_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "avatar-server" / "avatars")
    """Where uploaded and --avatar portraits are kept, prepared and analysed."""
    mirror_echo: int = 1
    """Mirror mode: 1 plays the user's voice back with the face, 0 sends silence instead."""
    llm_base_url: str = ""
    """Chat mode's OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 (Ollama)."""
    llm_model: str = ""
    llm_api_key: str = ""
    tts_voice: str = ""
    """Piper voice model (.onnx); empty means the bundled joe-us voice."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "ServerConfig":
        env = dict(os.environ if env is None else env)
        values = {}
        for f in fields(cls):
            raw = env.get(f"AVATAR_{f.name.upper()}")
            if raw is not None:
                values[f.name] = _parse(f.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _parse(kind: str, raw: str):
    if kind == "int":
        return int(raw)
    if kind == "Path":
        return Path(raw)
    if kind.startswith("tuple"):
        return tuple(s.strip() for s in raw.split(",") if s.strip())
    return raw
