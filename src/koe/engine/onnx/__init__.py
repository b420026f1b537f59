"""The default backend: Kokoro-82M through ONNX Runtime, and its streaming decoder.

:mod:`~koe.engine.onnx.engine` loads the single graph; :mod:`~koe.engine.onnx.stages` cuts it into a
front and a vocoder that :mod:`~koe.engine.onnx.decoder` runs window by window, with per-voice statistics
from :mod:`~koe.engine.onnx.calibration` and :mod:`~koe.engine.onnx.moments`, windows sized and joined by
:mod:`~koe.engine.onnx.windowing`.
"""
