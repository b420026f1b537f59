"""koe: streaming text-to-speech for voice agents.

Text streamed by an LLM is cut into speakable segments (:mod:`koe.text`), turned into phonemes
(:mod:`koe.g2p`), synthesized by Kokoro-82M (:mod:`koe.engine`), scheduled across sessions
(:mod:`koe.scheduler`), encoded (:mod:`koe.audio`) and streamed out (:mod:`koe.server`).
"""

from __future__ import annotations

__version__ = "0.1.0"
