# nbkube Makefile. `make help` lists the targets.

# Pinned tool versions: the Kubernetes 1.36 line everywhere.
KUBE_VERSION ?= v1.36.3
CONTROLLER_TOOLS_VERSION ?= v0.21.0
KUSTOMIZE_VERSION ?= v5.8.1
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0

# Where the hack/ script keeps the Kubernetes binaries it builds (shared by every clone).
NBKUBE_CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nbkube
KUBE_BIN_DIR ?= $(NBKUBE_CACHE_DIR)/k8s/$(KUBE_VERSION)/bin
export NBKUBE_CACHE_DIR KUBE_VERSION

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# Test flags: `make test TEST_FLAGS='-run Foo -v'`.
TEST_FLAGS ?=
# `make run` passes these to `nbkube local`.
RUN_ARGS ?=
# How many inputs `make test-faults` fuzzes the HTTP routes with beyond their seeds. A count,
# not a duration: Go 1.26's fuzzing coordinator can fail a run whose -fuzztime deadline passes
# while a worker is mid-input ("context deadline exceeded", golang/go#75804, fixed in 1.27).
FUZZTIME ?= 5000x
# `make bench` measures these sections: contents, kernels, terminals, nbconvert, pages or all.
BENCH_ONLY ?= all
SCALE_KERNELS ?= 10000

.DEFAULT_GOAL := help
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: controller-gen ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC into config/, and copy them into the chart.
	$(CONTROLLER_GEN) rbac:roleName=manager crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=apiserver paths="./internal/repository/..." output:rbac:artifacts:config=config/rbac/apiserver
	rm -rf charts/nbkube/crds charts/nbkube/files/rbac && mkdir -p charts/nbkube/crds charts/nbkube/files/rbac
	cp config/crd/bases/*.yaml charts/nbkube/crds/
	cp config/rbac/role.yaml charts/nbkube/files/rbac/manager.yaml
	cp config/rbac/apiserver/role.yaml charts/nbkube/files/rbac/apiserver.yaml

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint (with its import walls, depguard), also over the e2e- and faults-tagged tests.
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --build-tags e2e,faults ./test/...

.PHONY: verify
verify: generate manifests fmt vet lint kustomize web-check web-lint ## Regenerate code and manifests, lint, and fail if anything changed.
	$(KUSTOMIZE) build config/default >/dev/null
	@if [ -n "$$(git status --porcelain -- api config controllers charts go.mod go.sum '*.go')" ]; then \
		echo "make verify: generated files or formatting differ from what is committed:"; \
		git status --porcelain -- api config controllers charts go.mod go.sum '*.go'; git --no-pager diff --stat; exit 1; fi

.PHONY: test
test: k8s-bins hydra test-deps helm kustomize web ## Run all tests (web unit tests; Go: unit, envtest, chart, local node with real ipykernel, pages in Chromium).
	cd web && npm test
	KUBEBUILDER_ASSETS="$(KUBE_BIN_DIR)" NBKUBE_KUBE_BIN_DIR="$(KUBE_BIN_DIR)" NBKUBE_HELM="$(HELM)" NBKUBE_KUSTOMIZE="$(KUSTOMIZE)" go test ./... $(TEST_FLAGS)

.PHONY: test-faults
test-faults: k8s-bins test-deps ## Fault-injection suite (root, for a tmpfs): kill -9 under saves, a full volume, the control plane stopped, kernels killed and their pods deleted, fuzzed routes and frames; figures in docs/reliability.md.
	KUBEBUILDER_ASSETS="$(KUBE_BIN_DIR)" NBKUBE_KUBE_BIN_DIR="$(KUBE_BIN_DIR)" go test -tags faults ./test/faults/ -count=1 -v $(TEST_FLAGS)
	go test -tags faults ./test/faults/ -run '^$$' -fuzz '^FuzzAPI$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0

.PHONY: test-e2e
test-e2e: require-root image kernel-image helm k8s-bins kube-router containerd ## Real single-node cluster (root): helm install, then kernels, clusters, upgrade, uninstall.
	HELM="$(HELM)" IMG="$(IMG)" KERNEL_IMG="$(KERNEL_IMG)" IMAGES_DIR="$(IMAGES_DIR)" TEST_FLAGS="$(TEST_FLAGS)" hack/test-e2e.sh

.PHONY: require-root
require-root: # The cluster tier installs packages, runs containerd and kubelet, makes bridges.
	@[ "$$(id -u)" -eq 0 ] || { echo "make test-e2e needs root (sudo make test-e2e); make test runs every other tier" >&2; exit 1; }

.PHONY: test-deps
test-deps: ## Install the Debian packages the tests use (python3-ipykernel, python3-ipyparallel, python3-jupyter-server) if missing.
	@hack/install-test-deps.sh

.PHONY: bench
bench: build k8s-bins ## Measure nbkube against Debian's Jupyter Server, and the web pages in Chromium; results in docs/benchmarks.md (BENCH_ONLY=pages for one section).
	go run ./test/bench -nbkube $(LOCALBIN)/nbkube -only $(BENCH_ONLY) -out docs/benchmarks.md

.PHONY: bench-scale
bench-scale: build k8s-bins ## One manager with 10,000 Kernels on a simulated node, and a thousand idle channels WebSockets on nbkube local; section "Scale" of docs/benchmarks.md (SCALE_KERNELS=n for fewer).
	go run ./test/bench -nbkube $(LOCALBIN)/nbkube -only scale -scale-kernels $(SCALE_KERNELS) -out docs/benchmarks.md

.PHONY: bench-e2e
bench-e2e: require-root image kernel-image helm k8s-bins kube-router containerd ## Kernel, terminal and dask cluster starts on the real single-node cluster (root) against bare pods of the same image; sections "Kernels on a real cluster", "Terminals on a real cluster" and "Dask clusters on a real cluster" of docs/benchmarks.md (BENCH_E2E_ONLY=cluster-dask for one).
	HELM="$(HELM)" IMG="$(IMG)" KERNEL_IMG="$(KERNEL_IMG)" IMAGES_DIR="$(IMAGES_DIR)" hack/bench-e2e.sh

##@ Build

.PHONY: web
web: web/node_modules ## Build the web pages (web/src, TypeScript) into web/dist, which go build embeds.
	cd web && node build.mjs

# npm ci when node_modules is missing or older than the lock file.
web/node_modules: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error && touch node_modules

.PHONY: web-check
web-check: web/node_modules ## Type-check the web pages' TypeScript.
	cd web && npx --no-install tsc --noEmit -p .

.PHONY: web-lint
web-lint: web/node_modules ## Lint the web pages (eslint, typescript-eslint) and check their layout (prettier).
	cd web && npx --no-install eslint . && npx --no-install prettier --check .

.PHONY: build
build: web ## Build the nbkube, nbkube-agent and nbkube-pod-init binaries into bin/ (static), with the web pages.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(LOCALBIN)/nbkube ./cmd/nbkube
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/nbkube-agent ./cmd/nbkube-agent
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/nbkube-pod-init ./cmd/nbkube-pod-init

# Images for a cluster. Without Docker or a registry here, they are built as tarballs with
# go-containerregistry and imported into the node's containerd (the Dockerfile builds the same
# operator image where Docker exists). A tag other than latest lets pods use them unpulled.
IMAGE_TAG ?= dev
IMG ?= nbkube.io/nbkube:$(IMAGE_TAG)
KERNEL_IMG ?= nbkube.io/kernel-python:$(IMAGE_TAG)
IMAGES_DIR ?= $(LOCALBIN)/images

.PHONY: image
image: build ## Build the operator's image as a tarball, bin/images/nbkube.tar (no Docker needed).
	rm -rf $(IMAGES_DIR)/nbkube-root && mkdir -p $(IMAGES_DIR)/nbkube-root/usr/local/bin $(IMAGES_DIR)/nbkube-root/etc
	install -m 1777 -d $(IMAGES_DIR)/nbkube-root/tmp
	cp $(LOCALBIN)/nbkube $(LOCALBIN)/nbkube-agent $(IMAGES_DIR)/nbkube-root/usr/local/bin/
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >$(IMAGES_DIR)/nbkube-root/etc/passwd
	printf 'root:x:0:\nnonroot:x:65532:\n' >$(IMAGES_DIR)/nbkube-root/etc/group
	go run ./hack/image -rootfs $(IMAGES_DIR)/nbkube-root -root-owned -tag $(IMG) -o $(IMAGES_DIR)/nbkube.tar \
		-entrypoint /usr/local/bin/nbkube -user 65532:65532

.PHONY: kernel-image
kernel-image: ## Build the Python kernel image (Debian's ipykernel and ipyparallel), bin/images/kernel-python.tar.
	hack/kernel-image.sh $(IMAGES_DIR)/kernel-python.tar $(KERNEL_IMG)

.PHONY: run
run: build k8s-bins ## Run nbkube locally: embedded control plane, manager and local node (data in .nbkube/).
	$(LOCALBIN)/nbkube local --kube-bin-dir "$(KUBE_BIN_DIR)" $(RUN_ARGS)

.PHONY: k8s-bins
k8s-bins: ## Build etcd, kube-apiserver, kube-controller-manager and kubectl from the Go module proxy (cached).
	@hack/build-k8s.sh >/dev/null

.PHONY: hydra
hydra: ## Build ORY Hydra, the OpenID Connect provider the oidc identity tests run against (cached).
	@hack/build-hydra.sh >/dev/null

.PHONY: kube-router
kube-router: ## Build kube-router, whose network policy controller enforces NetworkPolicies in the e2e cluster (cached).
	@hack/build-kube-router.sh >/dev/null

.PHONY: containerd
containerd: ## Build containerd 2 (image volumes), the container runtime of the e2e cluster (cached).
	@hack/build-containerd.sh >/dev/null

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN): | $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Install kustomize into bin/.
$(KUSTOMIZE): | $(LOCALBIN)
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

.PHONY: helm
helm: $(HELM) ## Install helm into bin/.
$(HELM): | $(LOCALBIN)
	$(call go-install-tool,$(HELM),helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Install golangci-lint into bin/.
$(GOLANGCI_LINT): | $(LOCALBIN)
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

# go-install-tool installs a pinned version of a Go tool under a versioned name.
# $1 target path, $2 package, $3 version.
define go-install-tool
@set -e; echo "installing $(2)@$(3)"; \
GOBIN=$(LOCALBIN) go install $(2)@$(3); \
mv -f "$(LOCALBIN)/$$(basename "$$(echo $(2) | sed -E 's#/v[0-9]+$$##')")" "$(1)"
endef
