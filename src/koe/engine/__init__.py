"""Phonemes + voice + speed → float32 audio at 24 kHz.

``base`` holds the interface, ``onnx`` the default ONNX Runtime backend, ``voices`` the style tables and
blends, ``assets`` where the model and voices come from and how they are verified.
"""
