"""Text → phonemes, per language: misaki English (American, British), Japanese (OpenJTalk readings through
misaki's romanizer), Mandarin (misaki's pinyin reading), espeak-ng for Spanish, French, Hindi, Italian and
Brazilian Portuguese; each built at load or on first use (:mod:`koe.g2p.registry`), and token-window
chunking."""
