"""Model families: motion (audio to motion coefficients) and portrait (coefficients to pixels)."""
