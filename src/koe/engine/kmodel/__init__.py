"""Kokoro's PyTorch model (hexgrad's ``KModel``) behind the torch engine: where its weights come from
(the official checkpoint, or derived offline from the int8 ONNX export), and a batched forward pass whose
padding is masked so that an utterance sounds the same alone or in a batch. Importing it needs torch and
``kokoro`` (the GPU extra); the engine itself is :mod:`koe.engine.torch`.
"""
