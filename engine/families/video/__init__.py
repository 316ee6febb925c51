"""Video avatars: a person's own clip as the reference (frames, mouths, motion)."""
