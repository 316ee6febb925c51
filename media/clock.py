"""The media clock: 25 video frames a second, each with 40 ms of 48 kHz sound."""

FPS = 25
SAMPLE_RATE = 48_000
SAMPLES_PER_FRAME = SAMPLE_RATE // FPS  # 1920: one video frame of sound
FRAME_S = 1 / FPS
FRAME_MS = 1000 // FPS  # 40
VIDEO_CLOCK = 90_000  # RTP's video clock (Hz): a frame is VIDEO_CLOCK // FPS ticks of it
