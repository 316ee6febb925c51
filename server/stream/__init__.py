"""Media out: signaling, the render-ahead pump, the playout clock, the tracks, the real-time
H.264 encoder and the link's bitrate and resend control, extra viewers and the watchdog."""
