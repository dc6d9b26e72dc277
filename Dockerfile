# One image for the service, the relay and the demo agent.
# Build: docker build -t lineup-runtime .   Run: see docker-compose.yml.
# Podman: podman build --format docker -t lineup-runtime .  (the OCI format, Podman's default, drops
# the HEALTHCHECK below without a word); podman-compose runs docker-compose.yml as it is.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir -p service relay web_host demo_agent \
    && touch service/__init__.py relay/__init__.py web_host/__init__.py demo_agent/__init__.py \
    && pip install . && pip uninstall -y lineup-runtime

FROM python:3.11-slim AS runtime
# The release (pyproject.toml's version, which tests/unit/test_version.py keeps this default equal
# to) and the commit built: docker build --build-arg REVISION=$(git rev-parse HEAD) -t lineup-runtime .
ARG VERSION=0.5.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="Lineup Runtime" \
      org.opencontainers.image.description="MiniApp tool calls decided in Postgres, delivered by an outbox relay" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 lineup \
    && useradd --system --uid 10001 --gid lineup --home-dir /app --shell /usr/sbin/nologin lineup
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY --chown=root:root alembic.ini pyproject.toml ./
COPY --chown=root:root migrations migrations
COPY --chown=root:root service service
COPY --chown=root:root relay relay
COPY --chown=root:root web_host web_host
COPY --chown=root:root demo_agent demo_agent
USER lineup
EXPOSE 8000 9100
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
CMD ["python", "-m", "service", "serve", "--host", "0.0.0.0", "--port", "8000"]
