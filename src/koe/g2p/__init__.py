"""Text → phonemes: misaki English (American, British) with an espeak fallback, and token-window chunking."""
