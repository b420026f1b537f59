"""One listener's text → timed audio: the speaking pipeline every transport shares, knowing none of them.

:mod:`~koe.pipeline.speech` (G2P + engine + voices), the :mod:`~koe.pipeline.segment_decode` that is the one
phonemes → engine loop, one segment's :mod:`~koe.pipeline.job`, a turn's :mod:`~koe.pipeline.stream` of
segments on the shared scheduler, the :mod:`~koe.pipeline.listener`'s account of buffered audio, and the
:mod:`~koe.pipeline.speaker` loop that turns a stream into events for a transport, all opened from one
:mod:`~koe.pipeline.synthesizer`.
"""
