"""What the avatar says and hears: the speech queue and its utterances, the sources of speech
(TTS text, an agent's PCM over a WebSocket, the user's microphone in mirror mode) and chat
mode's conversation (VAD, turn ends, ASR, the LLM)."""
