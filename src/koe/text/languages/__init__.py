"""Language-specific text rules: what the segmenter counts and the normalizer rewrites in each language
Kokoro speaks (:mod:`koe.text.languages.lookup` gives a language's rules and segmenter)."""
