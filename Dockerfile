# syntax=docker/dockerfile:1
# sglang-exporter: Prometheus exporter / Kubernetes sidecar for SGLang.
#
#   docker build -t sglang-exporter:$(python3 -c 'import exporter; print(exporter.__version__)') .
#   docker run --rm -v /path/to/logs:/logs:ro -p 18400:18400 sglang-exporter:TAG --log.path /logs/sglang.log
#
# Arguments after the image name are passed to `sglang-exporter` unchanged (ENTRYPOINT), and every
# flag can also be given as SGLANG_EXPORTER_<GROUP>__<NAME>. The image runs as the numeric non-root
# user 65532 (so Kubernetes can verify runAsNonRoot), writes nothing at run time (bytecode is compiled
# at build time, PYTHONDONTWRITEBYTECODE=1), and therefore works with readOnlyRootFilesystem.
#
# The base is pinned to an exact Python patch release on Debian bookworm; tests/test_deploy_docker.py
# checks that (and the non-root USER) statically. Release builds may pin the digest too
# (python:3.12.11-slim-bookworm@sha256:...), resolved by the build pipeline.

FROM python:3.12.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what `pip install .` needs (.dockerignore keeps everything else out of the context).
COPY pyproject.toml README.md ./
COPY exporter ./exporter
RUN python -m venv /opt/sglang-exporter \
 && /opt/sglang-exporter/bin/pip install --no-cache-dir . \
 && /opt/sglang-exporter/bin/python -m compileall -q /opt/sglang-exporter/lib \
 && /opt/sglang-exporter/bin/sglang-exporter --help >/dev/null

FROM python:3.12.11-slim-bookworm
LABEL org.opencontainers.image.title="sglang-exporter" \
      org.opencontainers.image.description="Prometheus exporter and Kubernetes sidecar for SGLang inference servers" \
      org.opencontainers.image.licenses="Apache-2.0"
# Same base image as the build stage, so the venv's interpreter links stay valid.
COPY --from=build /opt/sglang-exporter /opt/sglang-exporter
ENV PATH=/opt/sglang-exporter/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# nobody-style numeric user and group; no home directory or writable path is needed.
USER 65532:65532
EXPOSE 18400
ENTRYPOINT ["sglang-exporter"]
CMD ["--log.path", "/logs/sglang.log"]
