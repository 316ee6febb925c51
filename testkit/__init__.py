"""What tests and benchmarks share: a real server process (server.py), audio files
(audio.py), a local OpenAI-compatible LLM (fake_llm.py) and the system Chromium (browser.py)."""
