# syntax=docker/dockerfile:1.7
# koe's voice agent for Amazon Bedrock AgentCore Runtime: `koe agent` on port 8080 (GET /ping,
# POST /invocations, WebSocket /ws) speaking through koe's SageMaker endpoint. AgentCore Runtime runs
# linux/arm64 images only: the CDK asset builds this one for that platform (by hand:
# docker buildx build --platform linux/arm64 -f deploy/agent.Dockerfile .). No engine and no model inside:
# koe goes in without its dependencies, beside the agent's own pinned list (deploy/agent-requirements.txt).
ARG PYTHON_IMAGE=python:3.12.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/koe/venv/bin:$PATH
RUN python -m venv /opt/koe/venv
WORKDIR /src
# the list is the whole closure: --no-deps installs exactly it, and pip check proves nothing is missing
COPY deploy/agent-requirements.txt ./
RUN pip install --no-cache-dir --no-deps -r agent-requirements.txt \
    && pip check
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir --no-deps .

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="koe agent" \
      org.opencontainers.image.description="Voice agent on Bedrock AgentCore Runtime, speaking through koe's SageMaker endpoint" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 koe \
    && useradd --system --uid 10001 --gid koe --create-home --shell /usr/sbin/nologin koe
COPY --from=build /opt/koe/venv /opt/koe/venv
COPY deploy/serve-agent /usr/local/bin/serve-agent
ENV PATH=/opt/koe/venv/bin:$PATH \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /home/koe
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/ping', timeout=4)"]
CMD ["serve-agent"]
