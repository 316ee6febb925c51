"""Video avatars: building evaluation clips and measuring re-enactment against real footage."""
