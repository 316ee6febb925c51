"""Speech for the server, batch rendering and training, without torch: sentence splitting
(sentences.py) and text to speech (tts.py: piper in a process of its own)."""
