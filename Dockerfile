# crunchd container image: build on the CUDA devel image with the same `make deps` and
# `make build` that CI runs (so the two cannot drift), run on the matching CUDA runtime image
# (cudart, cuBLAS) with only the binary and its shared libraries, as a non-root user.
#
#   docker build -t crunchd .                                  # sm_90 (H100/H200)
#   docker build --build-arg CUDA_ARCH=sm_80 -t crunchd .      # A100; PTX for newer GPUs too
#   docker run --gpus all -p 8080:8080 -p 8001:8001 --stop-timeout 40 crunchd   # HTTP, gRPC
#
# With no GPU (or without --gpus) the daemon falls back to its CPU backend (CRUNCHD_BACKEND=auto).
# /run/crunchd (owned by the daemon's user) is where CRUNCHD_UNIX_SOCKET may put a Unix socket;
# a named volume mounted there starts with that ownership, so a sidecar can share the socket.

ARG CUDA_VERSION=13.0.1
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG CUDA_ARCH=sm_90
# .git stays out of the build context: `docker build --build-arg GIT_REV=$(git describe --always --dirty)`
ARG GIT_REV=unknown
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src

# Dependencies first (their own layer, rebuilt only when the package lists change). `make`
# itself is the one thing `make deps` cannot install.
COPY Makefile VERSION ./
COPY scripts/deps.sh scripts/deps.sh
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends make \
 && CRUNCHD_NO_BROWSER=1 make deps \
 && rm -rf /var/lib/apt/lists/*

COPY . .
RUN make build CUDA_ARCH="${CUDA_ARCH}" GIT_REV="${GIT_REV}" \
 && build/crunchd --help > /dev/null \
 && build/crunchd --version

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The runtime image already carries cudart and cuBLAS (libcublas-13-0); these are the rest of
# what `ldd crunchd` names.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libmicrohttpd12t64 libcjson1 libuuid1 zlib1g libopenblas0 libgnutls30t64 libnghttp2-14 libprotobuf-c1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 crunchd \
 && useradd --system --uid 10001 --gid crunchd --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin crunchd \
 && install -d -o 10001 -g 10001 -m 0750 /run/crunchd /var/cache/crunchd

COPY --from=build /src/build/crunchd /usr/local/bin/crunchd
# Fail the build, not the first start, when a shared library is missing.
RUN ! ldd /usr/local/bin/crunchd | grep 'not found' \
 && crunchd --version

ENV CRUNCHD_BIND=0.0.0.0 \
    CRUNCHD_PORT=8080 \
    CRUNCHD_GRPC_PORT=8001 \
    CRUNCHD_BACKEND=auto \
    CRUNCHD_DRAIN_TIMEOUT_S=30 \
    CRUNCHD_AUTO_CACHE=/var/cache/crunchd/auto.json \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
# HTTP (/v1, /v2), and gRPC: KServe v2 (tritonclient.grpc, perf_analyzer -i grpc) and grpc.health.v1
EXPOSE 8080 8001

# SIGTERM drains (readiness fails, queued and running jobs finish) for up to
# CRUNCHD_DRAIN_TIMEOUT_S; give `docker stop` more than that: --stop-timeout 40.
STOPSIGNAL SIGTERM
# Liveness, not readiness: a draining daemon is healthy, just not taking new work.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["crunchd", "--check", "http://127.0.0.1:8080/healthz"]

ENTRYPOINT ["crunchd"]
