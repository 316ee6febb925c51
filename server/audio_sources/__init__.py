"""Sources of speech audio for a session."""
