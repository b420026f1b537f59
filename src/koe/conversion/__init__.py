"""Model conversion, offline: KModel weights derived from the int8 ONNX export (what the torch engine runs
without internet), the install that caches them, and the stage-by-stage check that PyTorch with them
computes what the graph computes. Needs torch and ``kokoro`` (the GPU extra); the engine only loads the
result (:mod:`koe.engine.kmodel.checkpoint`).
"""
