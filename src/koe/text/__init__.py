"""Text in, speakable segments out: the incremental segmenter and the speech normalizer (pure, no I/O)."""
