# pysched container image: slim Python, non-root (65532), runs with a read-only root filesystem.
# Build: make image (hack/image.sh: docker or buildah, with or without a registry; an OCI archive, its
# digest, an SBOM and a scan; tests/e2e/test_image_build.py checks them); push: make image-push.
# tests/e2e/test_image_entrypoint.py runs this file's ENTRYPOINT + CMD with its ENV and USER against
# a test API server, with / read-only and only /tmp writable.
#
# Base image pinned by tag and digest (python:3.11.14-slim-bookworm; the digest is the one several
# public Dockerfiles pin for that tag's multi-architecture index: this machine has no registry access
# to re-resolve it). Re-check or bump with `docker buildx imagetools inspect <tag>`, or override
# with `make image BASE_IMAGE=...`.
ARG BASE_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
# pysched-cel (cmd/pysched-cel: kube-scheduler's own DRA CEL code) is a static Go binary; any Go at
# least as new as its go.mod's directive builds it. Pinned by tag only (no registry access here to
# resolve a digest): override with `make image GO_IMAGE=...`.
ARG GO_IMAGE=golang:1.25-bookworm

FROM ${GO_IMAGE} AS cel
WORKDIR /src
COPY cmd/pysched-cel ./
RUN CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o /pysched-cel .

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY requirements.lock pyproject.toml README.md LICENSE ./
COPY scheduler ./scheduler
COPY plugins ./plugins
# the engine and its policy plugins (plugins/: GPU, AZSpread, CapacityType, InstanceType, found
# through their pysched.plugins entry points); add your own plugin packages' wheels the same way
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --no-deps -w /wheels -r requirements.lock \
 && pip wheel --no-cache-dir --no-deps -w /wheels . ./plugins

FROM ${BASE_IMAGE}
# Nothing is written at start-up outside /tmp (mount an emptyDir there): no bytecode caches, HOME
# and TMPDIR in /tmp, and the self-signed serving certificate in /tmp/pysched-certs (--cert-dir's
# default). The configuration is mounted read-only at /etc/pysched (manifests/deployment.yaml).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp TMPDIR=/tmp
COPY --from=build /wheels /wheels
COPY --from=cel /pysched-cel /usr/local/bin/pysched-cel
# setuid/setgid bits off (su, mount, passwd... of the base): nothing in the image may gain privileges
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels \
 && find / -xdev -type f -perm /6000 -exec chmod ug-s {} + \
 && python -c "import pysched, pysched.plugins, pysched_policy, kopf, numpy, orjson" \
 && python -c "from pysched.framework.registry import build_registry; assert {'GPU', 'AZSpread'} <= set(build_registry())" \
 && echo '{"op":"version"}' | pysched-cel | grep -q '"kubernetes"'
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["pysched"]
# In a container the secure port listens on every address of its own network namespace (the pod
# IP: the kubelet's probes and Prometheus), not pysched's default 127.0.0.1; manifests/ and the
# chart, which replace CMD with their args, pass the same flag.
CMD ["--config", "/etc/pysched/config.yaml", "--bind-address=0.0.0.0"]
