# syntax=docker/dockerfile:1.7
# koe, GPU image: hexgrad's kokoro KModel in PyTorch (>= 2.10: PYSEC-2026-2286) on CUDA, sessions
# sharing engine calls. `koe install --engine torch` installs the weights while the image builds, chosen as
# `koe serve` chooses them: the official kokoro-v1_0.pth (sha256-pinned) when Hugging Face is reachable,
# else weights derived offline from the verified int8 model (digest-pinned; "dequantized int8" in the
# log). KOE_WEIGHTS=official|derived forces one. The voices (npm pack kokoro-js@1.2.1, every voice checked)
# come the same way; nothing is downloaded when the container starts.
# The base is CUDA's `base` flavour on purpose: torch's wheels bring their own cuBLAS/cuDNN, so the
# `runtime` flavour would ship those libraries twice.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-base-ubuntu24.04
ARG NODE_IMAGE=node:20.19.4-bookworm-slim

FROM ${NODE_IMAGE} AS node

FROM ${CUDA_IMAGE} AS python
# Ubuntu 24.04's Python is 3.12; its patch level follows the distribution's security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install --yes --no-install-recommends python3.12 python3.12-venv \
    && rm -rf /var/lib/apt/lists/*

FROM python AS build
ARG TORCH_VERSION=2.13.0
ARG KOE_WEIGHTS=auto
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/koe/venv/bin:$PATH \
    KOE_CACHE_DIR=/opt/koe/cache
# npm is needed only here, to fetch the voices package; it never reaches the final image
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s /usr/local/lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && python3.12 -m venv /opt/koe/venv
# torch first, in its own layer: the largest and least often changed dependency
RUN pip install --no-cache-dir "torch==${TORCH_VERSION}"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# kokoro without its dependencies: its misaki[en] would pull phonemizer-fork over koe's phonemizer;
# the gpu extra lists what KModel really imports. The derivation needs only koe's own dependencies (onnx
# and the four int8 model packages).
# pyopenjtalk-plus (Japanese readings) without its 190 MB Sudachi dictionary, which koe does not use
RUN pip install --no-cache-dir "./[gpu]" "torch==${TORCH_VERSION}" \
    && pip install --no-cache-dir --no-deps "kokoro==0.9.4" \
    && pip install --no-cache-dir --no-deps "pyopenjtalk-plus==0.4.1.post10" "sudachipy==0.7.0"
RUN koe install --engine torch --weights "${KOE_WEIGHTS}"

FROM python
LABEL com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true \
      org.opencontainers.image.title="koe (GPU)" \
      org.opencontainers.image.description="Streaming Kokoro-82M text-to-speech for voice agents, PyTorch on CUDA" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 koe \
    && useradd --system --uid 10001 --gid koe --create-home --shell /usr/sbin/nologin koe
COPY --from=build /opt/koe/venv /opt/koe/venv
COPY --from=build /opt/koe/cache /opt/koe/cache
COPY deploy/serve /usr/local/bin/serve
ENV PATH=/opt/koe/venv/bin:$PATH \
    KOE_CACHE_DIR=/opt/koe/cache \
    KOE_ENGINE=torch \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /home/koe
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/ping', timeout=4)"]
CMD ["serve"]
