"""Float32 audio → bytes on the wire: PCM16, WAV, G.711, MP3, Opus, FLAC, AAC, and streaming resampling."""
