# pysched developer entry points. `make test` needs nothing pre-installed but python3 and go:
# it creates the virtualenv, installs the package, obtains etcd + kube-apiserver + kube-scheduler +
# kube-controller-manager (KUBEBUILDER_ASSETS or a cached build from the Go module proxy), kwok
# (PYSCHED_KWOK or a cached build of sigs.k8s.io/kwok), helm (HELM or a cached build from the Go
# module proxy) and pysched-cel (PYSCHED_CEL_HELPER or a cached build of cmd/pysched-cel) and runs
# every test.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# make image (hack/image.sh): IMAGE empty = ghcr.io/pysched/pysched:<pysched.__version__> (what the chart and manifests deploy); DOCKER docker or
# buildah (empty: docker when a Docker engine answers, else buildah); BASE_IMAGE/GO_IMAGE empty: the
# Dockerfile's pinned defaults, or local ones built first when no registry is reachable; IMAGE_OUT
# empty: a cache directory keyed by the build inputs.
IMAGE ?=
DOCKER ?=
BASE_IMAGE ?=
GO_IMAGE ?=
IMAGE_OUT ?=
PYTEST_ARGS ?=
# The oldest Kubernetes release pysched follows (the newest, 1.37.2, is hack/control-plane.sh's default).
OLDEST_K8S ?= 1.35.4
# make test's parallel pytest workers (pytest-xdist). The suite mostly waits on API servers and
# scheduler processes: on a 2-core machine 4 workers keep both cores busy (docs/testing.md).
PYTEST_WORKERS ?= 4
BENCH_ARGS ?= --modes drain,steady,burst --repeats 3 --pin auto --qps 5000/5000 --results-md bench/RESULTS.md

.PHONY: all venv install docs control-plane control-plane-oldest test-oldest kwok kubelet real-node-deps root-deps test-artifacts real-cluster test-real helm scheduler-plugins kueue prometheus cel-helper lint test unit e2e demo dev-cluster bench bench-gang-retries bench-gangs bench-gpushare bench-smoke soak image image-push release clean

all: test

# The engine (pysched) and its policy plugins (plugins/: pysched-policy, loaded through the
# pysched.plugins entry points as a user's plugin package is).
$(VENV)/.installed: pyproject.toml plugins/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e ".[test,bench,docs]" -e ./plugins
	touch $@

venv: $(VENV)/.installed

# Bytecode ahead of time for the editable package: with PYTHONDONTWRITEBYTECODE set (CI machines,
# many images) every start would otherwise compile it again (0.5 s of the time to the first bind).
install: $(VENV)/.installed
	$(PY) -m compileall -q scheduler/pysched plugins/src/pysched_policy

control-plane:
	./hack/control-plane.sh

# The oldest release pysched follows, for make test's second leg.
control-plane-oldest:
	K8S_VERSION=$(OLDEST_K8S) ./hack/control-plane.sh

# KWOK plays the kubelets of the living cluster (pysched_dev.livecluster).
kwok:
	./hack/kwok.sh

helm:
	./hack/helm.sh

# The real node (pysched_dev.realcluster; docs/real-node.md): Debian's containerd, runc and CNI plugins
# (and the image tools), installed when missing (root, apt-get); the kubelet and pause image.
real-node-deps:
	./hack/real-node-deps.sh

# What the image, release and real-node tests use, built before pytest starts so that no build
# competes with the timing-sensitive tests for the CPU: the image (hack/image.sh, as root or with
# docker; the tests then find it cached) and the arm64 pysched-cel of the release's wheels.
test-artifacts: install root-deps
	@if [ "$$(id -u)" = 0 ] || docker info >/dev/null 2>&1; then PY="$(PY)" ./hack/image.sh >/dev/null; fi
	PYSCHED_CEL_GOARCH=arm64 ./hack/pysched-cel.sh >/dev/null

# As root, the Debian packages of the tests that need root (the real node, the image build) before
# any test runs; elsewhere nothing, and those tests skip saying why.
root-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then ./hack/real-node-deps.sh >/dev/null; fi

kubelet: real-node-deps
	./hack/kubelet.sh

# scheduler-plugins' kube-scheduler (Coscheduling's oracle in tests/e2e/test_coscheduling_differential.py).
scheduler-plugins:
	./hack/scheduler-plugins.sh

# Kueue's manager, CRDs and webhook manifest (the job queueing in front of pysched in tests/e2e/test_kueue.py).
kueue:
	./hack/kueue.sh

prometheus:
	./hack/prometheus.sh

# pysched-cel: DRA selectors evaluated by kube-scheduler's own CEL code (cmd/pysched-cel).
cel-helper:
	./hack/pysched-cel.sh

# ruff (pycodestyle, pyflakes, isort, pyupgrade, bugbear) everywhere; mypy on the whole package and
# the policy plugins (every function body checked, pyproject.toml [tool.mypy]), and mypy --strict on
# the plugin API, the testing kit, every in-tree plugin package and the policy plugins; actionlint (hack/actionlint.sh, built from the Go module proxy) on the
# GitHub workflows.
lint: install
	$(PY) -m ruff check scheduler plugins pysched_dev tests bench hack examples
	$(PY) -m mypy -p pysched -p pysched_policy
	$(PY) -m mypy --strict --follow-imports=silent -p pysched.framework -p pysched.plugins -p pysched.testing -p pysched_policy
	MYPYPATH=scheduler $(PY) -m mypy --strict --follow-imports=silent examples/pysched-plugin-example/src/pysched_example_plugins
	"$$(./hack/actionlint.sh)" -shellcheck= -pyflakes= .github/workflows/*.yml

# The documentation site (mkdocs.yml), strict: a broken link or anchor fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

# Two legs: the whole suite against the newest release pysched follows (1.37.2: its control plane
# and kube-scheduler as the oracle), then the tests marked oldest_release (the differential suites)
# against the oldest (1.35.4), so both ends of the window stay checked.
test: install lint docs root-deps control-plane control-plane-oldest kwok helm scheduler-plugins kueue prometheus cel-helper test-artifacts
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_KWOK="$$(./hack/kwok.sh)" PYSCHED_HELM="$$(./hack/helm.sh)" PYSCHED_SCHEDULER_PLUGINS="$$(./hack/scheduler-plugins.sh)" PYSCHED_KUEUE="$$(./hack/kueue.sh)" PYSCHED_PROMETHEUS="$$(./hack/prometheus.sh)" PYSCHED_CHROMIUM="$$(./hack/chromium.sh)" PYSCHED_REQUIRE_CHROMIUM=1 \
		PYSCHED_CEL_HELPER="$$(./hack/pysched-cel.sh)" PYSCHED_REQUIRE_CEL_HELPER=1 \
		$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal --ignore=tests/real $(PYTEST_ARGS)
	$(MAKE) test-oldest
	$(MAKE) test-real

# make test's second leg: the differential suites against Kubernetes 1.35.4.
test-oldest: install control-plane-oldest cel-helper
	PYSCHED_BIN_DIR="$$(K8S_VERSION=$(OLDEST_K8S) ./hack/control-plane.sh)" PYSCHED_CEL_HELPER="$$(./hack/pysched-cel.sh)" PYSCHED_REQUIRE_CEL_HELPER=1 \
		$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal -m oldest_release tests/e2e $(PYTEST_ARGS)

# The real-node tier (tests/real): a cluster with a real kubelet on this machine. Needs root: elsewhere
# its tests skip, saying why. The packages and the kubelet are obtained first when root (a failure
# there is reported by the tests' fixture).
test-real: install control-plane kwok helm prometheus
	@if [ "$$(id -u)" = 0 ] && ./hack/real-node-deps.sh >/dev/null; then ./hack/kubelet.sh >/dev/null; fi
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_KWOK="$$(./hack/kwok.sh)" PYSCHED_HELM="$$(./hack/helm.sh)" PYSCHED_PROMETHEUS="$$(./hack/prometheus.sh)" \
		$(PY) -m pytest -p no:cacheprovider tests/real $(PYTEST_ARGS)

# The unit tier and the policy plugins' own tests, without building anything in Go: the cases
# that compare with kube-scheduler's own CEL (cmd/pysched-cel) run when it is already built
# (PYSCHED_CEL_HELPER or pysched-cel on PATH) and are skipped otherwise; make test always runs them.
unit: install
	$(PY) -m pytest -n 2 tests/unit plugins/tests $(PYTEST_ARGS)

e2e: install control-plane kwok helm scheduler-plugins kueue prometheus cel-helper
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_KWOK="$$(./hack/kwok.sh)" PYSCHED_HELM="$$(./hack/helm.sh)" PYSCHED_SCHEDULER_PLUGINS="$$(./hack/scheduler-plugins.sh)" PYSCHED_KUEUE="$$(./hack/kueue.sh)" PYSCHED_PROMETHEUS="$$(./hack/prometheus.sh)" PYSCHED_CHROMIUM="$$(./hack/chromium.sh)" PYSCHED_REQUIRE_CHROMIUM=1 \
		PYSCHED_CEL_HELPER="$$(./hack/pysched-cel.sh)" PYSCHED_REQUIRE_CEL_HELPER=1 \
		$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal tests/e2e $(PYTEST_ARGS)

demo: install control-plane kwok cel-helper
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_KWOK="$$(./hack/kwok.sh)" PYSCHED_CEL_HELPER="$$(./hack/pysched-cel.sh)" $(PY) -m pysched_dev.demo

# etcd, kube-apiserver, kube-controller-manager and KWOK with a handful of labelled nodes, until Ctrl-C.
dev-cluster: install control-plane kwok cel-helper
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_KWOK="$$(./hack/kwok.sh)" PYSCHED_CEL_HELPER="$$(./hack/pysched-cel.sh)" $(PY) -m pysched_dev.devcluster_cli $(DEV_CLUSTER_ARGS)

# A cluster with one real node (containerd, runc, kubelet 1.35.4) and KWOK nodes under the 1.37.2
# control plane, until Ctrl-C; needs root (docs/real-node.md). REAL_CLUSTER_ARGS: --kwok-nodes N,
# --image ARCHIVE (imported into the node), --keep.
real-cluster: install control-plane kwok kubelet
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_KWOK="$$(./hack/kwok.sh)" PYSCHED_KUBELET_DIR="$$(./hack/kubelet.sh)" exec \
		$(PY) -m pysched_dev.realcluster $(REAL_CLUSTER_ARGS)

bench: install control-plane cel-helper
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_CEL_HELPER="$$(./hack/pysched-cel.sh)" $(PY) -m bench.run $(BENCH_ARGS)

# How often a gang that cannot run is retried, pysched beside scheduler-plugins (bench/gang_retries.py;
# docs/compatibility.md). The scheduler-plugins-1.35 row needs SCHEDULER_PLUGINS_SOURCE: a checkout of
# scheduler-plugins master (no release for Kubernetes 1.35 is on the Go module proxy).
bench-gang-retries: install control-plane scheduler-plugins
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" $(PY) -m bench.gang_retries --repeats 3 --results-md bench/GANG_RETRIES.md \
		$(if $(SCHEDULER_PLUGINS_SOURCE),,--schedulers pysched,pysched-compatible,scheduler-plugins)

# A backlog of 100 gangs of 8 on 1,000 KWOK nodes in 4 blocks x 10 racks (bench.workloads GangBacklog;
# bench/GANGS.md, docs/benchmark.md): kube-scheduler 1.37 and pysched (upstream's topology placement,
# and its own TopologyAwarePlacement) on Kubernetes' PodGroups; scheduler-plugins and pysched on
# scheduler-plugins' PodGroups (Coscheduling). GANG_REPEATS=3 for medians of three (about 15 minutes).
GANG_REPEATS ?= 3
bench-gangs: install control-plane scheduler-plugins
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" $(PY) -m bench.run --workloads GangBacklog --cluster living \
		--modes drain --schedulers pysched,kube-scheduler,scheduler-plugins --pysched-profile default,topology \
		--repeats $(GANG_REPEATS) --pin auto --results-md bench/GANGS.md

# Alibaba's openb GPU trace replayed through GPUShare's policies and kube-scheduler's default profile,
# beside the FGD paper's published results (bench/GPUSHARE.md): 17 variants x 9 policies x 10 seeds.
# OPENB: the trace's directory (openb_node_list_gpu_node.csv, openb_pod_list_*.csv: not shipped, its
# terms allow research use only) with simulator-results/analysis_allo_discrete.csv.
OPENB ?=
bench-gpushare: install
	@test -n "$(OPENB)" || { echo "set OPENB to the openb trace's directory (bench/GPUSHARE.md)" >&2; exit 2; }
	$(PY) -m pysched trace --data "$(OPENB)" --traces all --policies all --seeds 42-51 --out bench/runs/gpushare \
		--published "$(OPENB)/simulator-results/analysis_allo_discrete.csv"

# The soak (bench/soak.py): pysched on a living cluster of 1,000 KWOK nodes for SOAK_MINUTES under churn
# (Deployments rescaled, Jobs, node failures, leader handovers), sampled every minute; writes
# bench/SOAK.md and its charts, and fails when a verdict does (SOAK_ARGS: more flags, see --help).
SOAK_MINUTES ?= 60
SOAK_ARGS ?=
soak: install control-plane kwok cel-helper
	PYSCHED_BIN_DIR="$$(./hack/control-plane.sh)" PYSCHED_KWOK="$$(./hack/kwok.sh)" PYSCHED_CEL_HELPER="$$(./hack/pysched-cel.sh)" \
		$(PY) -m bench.soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS) --results-md bench/SOAK.md

# The image from the Dockerfile, with docker or buildah (root; a private storage under
# ~/.cache/pysched/containers), with or without a container registry (no registry: a Debian + Python
# base from mmdebstrap and Go from the Go module proxy are built first, once). Writes image.oci.tar
# (an OCI archive named IMAGE: ctr images import, docker load, podman load), image.digest,
# sbom.cdx.json (CycloneDX) and scan.json into IMAGE_OUT or a cache directory, and prints that
# directory last; an unchanged tree reuses it. tests/e2e/test_image_build.py checks all four.
image: $(VENV)/.installed
	IMAGE="$(IMAGE)" DOCKER="$(DOCKER)" BASE_IMAGE="$(BASE_IMAGE)" GO_IMAGE="$(GO_IMAGE)" IMAGE_OUT="$(IMAGE_OUT)" PY="$(PY)" ./hack/image.sh

# image-push: make image, then copy the archive to the registry named by IMAGE (registry/name:tag; log
# in first: skopeo reads docker's and podman's credentials).
image-push: image
	$(if $(IMAGE),,$(error image-push needs IMAGE=registry/name:tag))
	skopeo copy "oci-archive:$$(IMAGE="$(IMAGE)" DOCKER="$(DOCKER)" BASE_IMAGE="$(BASE_IMAGE)" GO_IMAGE="$(GO_IMAGE)" PY="$(PY)" ./hack/image.sh | tail -1)/image.oci.tar" "docker://$(IMAGE)"

# Every artifact of a release, built here from the commit, into dist/release (pysched_dev.release):
# sdists, pysched's Linux amd64/arm64 wheels with pysched-cel, pysched-policy's wheel, the image as an
# OCI archive (hack/image.sh), the chart package, RELEASE_NOTES.md and SHA256SUMS. It refuses to start
# when the files disagree on the version. RELEASE_SKIP_IMAGE=1: all but the image (not a release).
release: install
	$(PY) -m pysched_dev.release

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
