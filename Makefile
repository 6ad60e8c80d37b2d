# dtnflow Makefile. `make demo` and `make test` do all the set-up they need on a fresh
# machine: `deps` (the Debian packages of every program run, hack/deps.txt) comes first in
# each target that runs programs; tools are installed into ./bin and slow builds are
# cached in ./.cache (both git-ignored).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
export GOTOOLCHAIN := local

ROOT := $(abspath .)
BIN := $(ROOT)/bin
CACHE := $(ROOT)/.cache
export PATH := $(BIN):$(PATH)

CONTROLLER_TOOLS_VERSION ?= v0.21.0
HELM_VERSION ?= v4.3.1
KUBE_VERSION ?= v1.36.0

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)

.PHONY: all
all: build

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Write CRDs and RBAC under config/ from the kubebuilder markers.
	$(CONTROLLER_GEN) rbac:roleName=dtnflow-manager crd:allowDangerousTypes=false paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Write deep-copy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./api/..."

.PHONY: fmt
fmt: ## gofmt every Go file.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet every package.
	go vet ./...

.PHONY: build
build: ## Build the manager, the agent and the kubectl plugin (kubectl-dtnflow) into ./bin.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/dtnflow-agent ./cmd/dtnflow-agent
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/kubectl-dtnflow ./cmd/kubectl-dtnflow

.PHONY: verify
verify: manifests generate chart-sync ## Fail when generated files, formatting or go.mod are stale.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go mod tidy
	@git diff --exit-code -- config api go.mod go.sum charts/dtnflow/files || { echo "generated files or go.mod are stale: run 'make manifests generate' and 'go mod tidy', then commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- config api charts/dtnflow/files); \
	  test -z "$$untracked" || { echo "generated files not committed: $$untracked"; exit 1; }

##@ Tests

.PHONY: deps
deps: ## Install the Debian packages of every program the tests, the demo, the benchmarks and hack/ run (hack/deps.txt), when any is missing.
	hack/deps.sh

.PHONY: test
test: deps verify vet test-unit test-race test-integration test-e2e ## Everything CI runs: verify, unit, race, integration and e2e tests (the e2e on the local cluster).

.PHONY: test-unit
test-unit: deps ## Unit tests (no API server).
	go test -count=1 $$(go list ./... | grep -v -e /test/integration -e /test/e2e/cluster -e /test/e2e/chart -e /test/e2e/federation)

.PHONY: test-race
test-race: deps ## The agent's, the optimizer's and the controllers' unit tests under the race detector; the agents agent/e2e starts are built with it too, and a report from any fails the run.
	go test -race -count=1 ./agent/... ./optimizer/... ./controllers/... ./internal/...

.PHONY: kube-assets
kube-assets: ## Build kube-apiserver, etcd and kubectl from the module proxy into .cache (reused).
	@hack/build-kube.sh kube-apiserver etcd kubectl >/dev/null

.PHONY: test-integration
test-integration: deps kube-assets ## Integration tests against a real kube-apiserver + etcd built from source.
	KUBEBUILDER_ASSETS=$$(hack/build-kube.sh kube-apiserver etcd kubectl) go test -count=1 ./test/integration/...

##@ Local cluster, images, chart and demo

# The local two-site cluster (hack/cluster, docs/local-cluster.md): a real control plane
# and one kubelet + containerd per node, each node in its own network namespace, the two
# sites joined through test/wanem. Needs root. State in $(CLUSTER_DIR).
HELM := $(BIN)/helm-$(HELM_VERSION)
KUBE_BIN := $(CACHE)/kube/$(KUBE_VERSION)/bin
KUBE_CLUSTER_COMPONENTS := kube-apiserver etcd kubectl kubelet kube-scheduler kube-controller-manager
CLUSTER_DIR ?= $(ROOT)/.local-cluster
E2E_TIMEOUT ?= 45m
# The host holds one local cluster at a time (hack/cluster/lib.sh, claim_host): unattended
# runs wait this long for another folder's live cluster to go down; `make cluster-up` and
# `make demo` refuse at once, naming it.
CLUSTER_WAIT ?= 1200

.PHONY: images
images: ## Build the manager, agent and pause images as OCI archives in .cache/images (no registry, no daemon).
	hack/images/build.sh

.PHONY: chart-sync
chart-sync: ## Copy the generated CRDs (rendered by templates/crds.yaml) and the manager's RBAC rules into charts/dtnflow/files.
	@mkdir -p charts/dtnflow/files/crds
	@rm -f charts/dtnflow/files/crds/*.yaml; cp config/crd/bases/*.yaml charts/dtnflow/files/crds/
	@if [ -f config/rbac/role.yaml ]; then cp config/rbac/role.yaml charts/dtnflow/files/manager-role.yaml; fi

.PHONY: helm
helm: $(HELM) ## Install Helm into ./bin (built from the Go module proxy).

.PHONY: helm-lint
helm-lint: chart-sync $(HELM) ## helm lint --strict and helm template the chart.
	$(HELM) lint --strict charts/dtnflow
	$(HELM) template dtnflow charts/dtnflow --namespace dtnflow-system >/dev/null

.PHONY: kube-cluster-assets
kube-cluster-assets: ## Build the Kubernetes components the local cluster runs (kubelet, scheduler, controller-manager too) into .cache (reused).
	@hack/build-kube.sh $(KUBE_CLUSTER_COMPONENTS) >/dev/null

.PHONY: cluster-up
cluster-up: deps kube-cluster-assets images ## Start the local two-site cluster (no dtnflow installed; see demo).
	DTN_CLUSTER_DIR=$(CLUSTER_DIR) hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and remove everything it created.
	DTN_CLUSTER_DIR=$(CLUSTER_DIR) hack/cluster/down.sh

.PHONY: test-e2e
test-e2e: deps kube-cluster-assets images chart-sync $(HELM) ## e2e on the local cluster: chart, Helm install, transfers, failures, re-plans; then the site pair (two clusters).
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -count=1 ./test/e2e/chart/...
	rc=0; DTN_CLUSTER_WAIT=$(CLUSTER_WAIT) DTN_CLUSTER_DIR=$(CLUSTER_DIR) DTN_HELM=$(HELM) go test -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/cluster/... $(E2E_FLAGS) || rc=$$?; \
	  DTN_CLUSTER_DIR=$(CLUSTER_DIR) hack/cluster/down.sh >/dev/null || rc=1; exit $$rc
	$(MAKE) test-e2e-federation

.PHONY: test-e2e-federation
test-e2e-federation: deps kube-cluster-assets images chart-sync $(HELM) ## e2e of a site pair: two clusters (DTN_CLUSTERS=2), dtnflow at each, paired; both directions, refusals, kills, a control plane restart, a cut link, revocation.
	rc=0; DTN_CLUSTER_WAIT=$(CLUSTER_WAIT) DTN_CLUSTER_DIR=$(CLUSTER_DIR) DTN_HELM=$(HELM) go test -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/federation/... $(E2E_FEDERATION_FLAGS) || rc=$$?; \
	  DTN_CLUSTERS=2 DTN_CLUSTER_DIR=$(CLUSTER_DIR) hack/cluster/down.sh >/dev/null || rc=1; exit $$rc

# The chaos suite (test/e2e/cluster/chaos_*_test.go, docs/reliability.md): every fault
# kind injected at random moments of running transfers on a cluster of two nodes per
# site with two manager replicas, then 200 jobs at once under faults. CHAOS_SEED repeats
# a run's schedule; CHAOS_KINDS=a,b runs only those kinds; CHAOS_LOAD=0 skips the load.
CHAOS_SEED ?=
CHAOS_KINDS ?=
CHAOS_LOAD ?=
CHAOS_TIMEOUT ?= 120m

.PHONY: test-chaos
test-chaos: deps kube-cluster-assets images chart-sync $(HELM) ## Faults on the local cluster, counted (seeded; figures in test/e2e/_artifacts/chaos/).
	rc=0; DTN_CLUSTER_WAIT=$(CLUSTER_WAIT) DTN_NODES_PER_SITE=2 DTN_MANAGER_REPLICAS=2 DTN_CHAOS=full DTN_CHAOS_SEED=$(CHAOS_SEED) DTN_CHAOS_KINDS=$(CHAOS_KINDS) DTN_CHAOS_LOAD=$(CHAOS_LOAD) \
	  DTN_CLUSTER_DIR=$(CLUSTER_DIR) DTN_HELM=$(HELM) go test -count=1 -timeout $(CHAOS_TIMEOUT) -v -run '^TestChaos$$' ./test/e2e/cluster/ || rc=$$?; \
	  DTN_CLUSTER_DIR=$(CLUSTER_DIR) hack/cluster/down.sh >/dev/null || rc=1; exit $$rc

.PHONY: demo
demo: deps kube-cluster-assets images chart-sync $(HELM) ## Run the main job on the local two-site cluster (set-up included); leaves it running.
	DTN_CLUSTER_DIR=$(CLUSTER_DIR) DTN_HELM=$(HELM) hack/demo.sh

.PHONY: demo-down
demo-down: cluster-down ## Tear the demo's cluster down.

# issue 11's side by side: every scenario of bench-wan (and bursty loss, 4 competing flows,
# a rate schedule) through the operator, send --auto, dtnflow's best fixed setting and
# globus-url-copy's defaults and Globus-like preset (about an hour)
BENCH_CLUSTER_FLAGS ?= -suite issue11 -tools operator,agent-auto,dtnflow-grid,gridftp-default,gridftp-preset -rate 1G -rtt 50ms \
  -large-size 4GiB -mixed-total 4GiB -mixed-max 1GiB -small-count 20000 -run-limit 180s
# bench-wan's conditions: storage on tmpfs, no NIC cap below the WAN, no CPU cap per site
BENCH_CLUSTER_ENV ?= DTN_STORAGE_DIR=/dev/shm/dtnflow-bench-cluster DTN_SITE_A_NIC_BPS=10000000000 DTN_SITE_B_NIC_BPS=10000000000 DTN_SITE_A_CPU_MILLI=2000 DTN_SITE_B_CPU_MILLI=2000

.PHONY: bench-cluster
bench-cluster: deps kube-cluster-assets images chart-sync $(HELM) ## bench-wan's WAN scenarios through the operator on the local cluster (BENCH_CLUSTER_FLAGS; table, JSON lines in .cache/).
	@mkdir -p $(BIN) $(CACHE)
	go build -o $(BIN)/bench-cluster ./test/e2e/cmd/bench-cluster
	# down.sh inside the lock: the next benchmark waiting for it must not start its cluster
	# (same namespace names) while this one is still being taken down.
	env $(BENCH_CLUSTER_ENV) DTN_CLUSTER_WAIT=$(CLUSTER_WAIT) DTN_CLUSTER_DIR=$(CLUSTER_DIR) DTN_HELM=$(HELM) flock /tmp/dtnflow-bench.lock \
	  bash -c '$(BIN)/bench-cluster -json $(CACHE)/bench-cluster.jsonl $(BENCH_CLUSTER_FLAGS); rc=$$?; hack/cluster/down.sh >/dev/null || rc=1; exit $$rc'

BENCH_SHARING_FLAGS ?= -rate 1G -rtt 50ms -jobs 3 -size 1GiB

.PHONY: bench-sharing
bench-sharing: deps kube-cluster-assets images chart-sync $(HELM) ## Jobs sharing one path through the operator on the local cluster: shares against weights, Jain's index, re-plan latency (BENCH_SHARING_FLAGS; JSON lines in .cache/).
	@mkdir -p $(BIN) $(CACHE)
	go build -o $(BIN)/bench-sharing ./test/e2e/cmd/bench-sharing
	env $(BENCH_CLUSTER_ENV) DTN_CLUSTER_WAIT=$(CLUSTER_WAIT) DTN_CLUSTER_DIR=$(CLUSTER_DIR) DTN_HELM=$(HELM) flock /tmp/dtnflow-bench.lock \
	  bash -c '$(BIN)/bench-sharing -json $(CACHE)/bench-sharing.jsonl $(BENCH_SHARING_FLAGS); rc=$$?; hack/cluster/down.sh >/dev/null || rc=1; exit $$rc'

##@ Benchmarks

.PHONY: bench-peers
bench-peers: deps ## dtnflow-agent side by side with iperf3 and GridFTP on loopback (table on stdout, JSON lines in .cache/).
	@mkdir -p $(BIN) $(CACHE)
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/dtnflow-agent ./cmd/dtnflow-agent
	go build -o $(BIN)/bench-peers ./test/bench/peers
	flock /tmp/dtnflow-bench.lock $(BIN)/bench-peers -agent $(BIN)/dtnflow-agent -json $(CACHE)/bench-peers.jsonl $(BENCH_PEERS_FLAGS)

BENCH_WAN_TOOLS ?= iperf3,gridftp-default,gridftp-preset,gridftp-grid,dtnflow-grid,dtnflow-auto
BENCH_WAN_FLAGS ?= -rate 1G -rtt 50ms -loss 0 -dataset large

.PHONY: bench-wan
bench-wan: deps ## Tools side by side on an emulated WAN (test/wanem): BENCH_WAN_FLAGS picks scenarios; table, JSON lines, plots in .cache/bench-wan/.
	@mkdir -p $(BIN) $(CACHE)/bench-wan
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/dtnflow-agent ./cmd/dtnflow-agent
	go build -o $(BIN)/bench-wan ./test/bench/wan/cmd/bench-wan
	flock /tmp/dtnflow-bench.lock $(BIN)/bench-wan -agent $(BIN)/dtnflow-agent -tools $(BENCH_WAN_TOOLS) $(BENCH_WAN_FLAGS)

.PHONY: bench-sharing-wan
bench-sharing-wan: deps ## Jobs sharing one emulated WAN path through the agents alone (send --auto --share-dir) beside simultaneous globus-url-copy runs, and fairness to iperf3 flows (BENCH_SHARING_WAN_FLAGS; JSON lines in .cache/).
	@mkdir -p $(BIN) $(CACHE)
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/dtnflow-agent ./cmd/dtnflow-agent
	go build -o $(BIN)/bench-sharing-wan ./test/bench/wan/cmd/bench-sharing-wan
	flock /tmp/dtnflow-bench.lock $(BIN)/bench-sharing-wan -agent $(BIN)/dtnflow-agent -json $(CACHE)/bench-sharing-wan.jsonl $(BENCH_SHARING_WAN_FLAGS)

.PHONY: bench-wanem
bench-wanem: deps ## Accuracy of the WAN emulator (rate, RTT, loss with iperf3 and ping; minutes).
	flock /tmp/dtnflow-bench.lock go test -count=1 -timeout 30m -run Accuracy -v ./test/wanem -wanem.accuracy

.PHONY: bench-resend
bench-resend: deps ## Data sent again when the receiver, then the sender, is killed -9 five times during a 940 MB transfer (on /dev/shm; a minute).
	DTNFLOW_RESEND_DIR=/dev/shm flock /tmp/dtnflow-bench.lock go test -count=1 -timeout 30m -run TestResendAfterKills -v ./agent/e2e -args -resend 2>&1 | grep -E 'RESULT|kill|^(---|ok|FAIL)'

BENCH_CONTROLLER_JOBS ?= 500

.PHONY: bench-controller
bench-controller: deps kube-assets ## The manager under load: BENCH_CONTROLLER_JOBS (500) TransferJobs planned and reconciled on a real API server; time to steady state, manager RSS.
	@mkdir -p $(BIN)
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/manager ./cmd/manager
	DTNFLOW_BENCH_JOBS=$(BENCH_CONTROLLER_JOBS) DTNFLOW_MANAGER_BIN=$(BIN)/manager KUBEBUILDER_ASSETS=$$(hack/build-kube.sh kube-apiserver etcd kubectl) \
	  flock /tmp/dtnflow-bench.lock go test -count=1 -timeout 30m -run '^$$' -bench BenchmarkManagerLoad -benchtime=1x ./test/integration/controllers/

##@ Set-up checks

FRESH_FLAGS ?=

.PHONY: check-fresh
check-fresh: ## Prove the set-up on a machine nobody prepared: make deps, make -n test, make verify and make test-unit in a debootstrapped minimal Debian (FRESH_FLAGS=--integration adds test-integration; not part of test).
	hack/fresh-check.sh $(FRESH_FLAGS)

##@ Tools

$(HELM):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $(HELM)

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/controller-gen $(CONTROLLER_GEN)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-22s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)
