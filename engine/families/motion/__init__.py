"""Audio to motion: audio features, MotionDiT and its sampling schedule, the lip-closure
detector, and the procedural interim and idle motion."""
