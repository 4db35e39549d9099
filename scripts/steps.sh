# Helpers for the Makefile's recipes (bash, one shell per recipe). Source it:
#   source scripts/steps.sh
#   services_up                 # start local AWS; stopped again when the recipe's shell exits
#   step "go vet" go vet ./...  # run a named step, record pass/fail, go on
#   summary "make test"         # one closing line; exit 1 if a step failed

_STEPS_PASSED=()
_STEPS_FAILED=()
_STEPS_SKIPPED=()
_STEPS_BG=()
_STEPS_T0=$SECONDS

# services_up starts DynamoDB Local and moto_server on free ports, exports
# their endpoints (and SENDONCE_TEST_RIE), and stops them when the shell
# exits, whether the recipe passes, fails or is interrupted.
services_up() {
	# Each run keeps its services' state in a directory of its own, so two
	# make runs in one work tree never stop each other's services.
	if [ -z "${SENDONCE_LOCAL_DIR:-}" ]; then
		SENDONCE_LOCAL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sendonce-local.XXXXXX")
		export SENDONCE_LOCAL_DIR
	fi
	trap 'scripts/local-aws.sh stop' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	scripts/local-aws.sh start
	# shellcheck disable=SC1091
	source "$SENDONCE_LOCAL_DIR/test.env"
	export SENDONCE_TEST_RIE=${SENDONCE_TEST_RIE:-$PWD/bin/aws-lambda-rie}
	echo "==> local AWS: DynamoDB Local $SENDONCE_TEST_DYNAMODB_ENDPOINT, moto_server $SENDONCE_TEST_MOTO_ENDPOINT, RIE $SENDONCE_TEST_RIE"
}

# services_keep starts local AWS in SENDONCE_LOCAL_DIR (default .local, as
# make services-start does) unless it runs there already, exports its test
# variables, and leaves it running when the recipe ends: make
# services-stop stops it.
services_keep() {
	if scripts/local-aws.sh running; then
		echo "==> local AWS: already running (${SENDONCE_LOCAL_DIR:-.local}/env)"
	else
		scripts/local-aws.sh start
	fi
	# shellcheck disable=SC1091
	source "${SENDONCE_LOCAL_DIR:-.local}/test.env"
	export SENDONCE_TEST_RIE=${SENDONCE_TEST_RIE:-$PWD/bin/aws-lambda-rie}
}

# services_down stops the local services now (services_up's trap would
# otherwise do it at exit), so the summary is the last line printed.
services_down() {
	scripts/local-aws.sh stop
	trap - EXIT
}

# step NAME CMD...: runs CMD, records NAME as passed or failed, and
# prints its wall time and the CPU time (user + system) of the processes
# it ran: on a shared machine the CPU time is the figure that compares.
step() {
	local name=$1 t0=$SECONDS rc=0 c0
	shift
	echo "==> $name"
	c0=$(_cpu_ticks)
	"$@" || rc=$?
	_step_done "$name" "$rc" "$((SECONDS - t0))s, CPU $(_cpu_since "$c0")s"
}

# _step_done NAME RC TOOK records step NAME as passed (RC 0) or failed and
# prints its line with TOOK, its wall and CPU time.
_step_done() {
	if [ "$2" -eq 0 ]; then
		_STEPS_PASSED+=("$1")
		echo "==> $1: ok ($3)"
	else
		_STEPS_FAILED+=("$1")
		echo "==> $1: FAILED (exit $2, $3)"
	fi
}

# step_bg NAME CMD...: starts CMD in the background as a named step (a
# command that mostly computes on one core, next to a step that mostly
# waits); its output goes to a file. step_wait waits for every step_bg
# step, prints its output and its line, and records it as step does.
step_bg() {
	local name=$1 dir
	shift
	dir=$(mktemp -d "${TMPDIR:-/tmp}/sendonce-step.XXXXXX")
	echo "==> $name: started in the background"
	(
		_STEPS_PID=$BASHPID
		t0=$SECONDS rc=0
		c0=$(_cpu_ticks)
		"$@" >"$dir/out" 2>&1 </dev/null || rc=$?
		echo "$rc $((SECONDS - t0))s, CPU $(_cpu_since "$c0")s" >"$dir/rc"
	) &
	_STEPS_BG+=("$!:$dir:$name")
}

# step_wait waits for the steps step_bg started and reports each (its
# output, then its line) in the order they were started.
step_wait() {
	local bg pid dir name rc took
	for bg in "${_STEPS_BG[@]}"; do
		pid=${bg%%:*} dir=${bg#*:} name=${dir#*:} dir=${dir%%:*}
		wait "$pid" || true
		echo "==> $name (ran in the background)"
		cat "$dir/out"
		read -r rc took <"$dir/rc" || { rc=1 took="?"; }
		_step_done "$name" "$rc" "$took"
		rm -rf "$dir"
	done
	_STEPS_BG=()
}

# _cpu_ticks prints the user + system clock ticks of this shell's waited-for
# children so far (/proc/PID/stat's cutime and cstime, of this shell: $$,
# or a background step's subshell, _STEPS_PID; not of the subshell that
# runs _cpu_ticks).
_cpu_ticks() {
	local f
	read -ra f </proc/"${_STEPS_PID:-$$}"/stat
	echo $((f[15] + f[16]))
}

# _cpu_since TICKS prints the seconds of children's CPU since TICKS.
_cpu_since() {
	local hz
	hz=$(getconf CLK_TCK)
	echo $((($(_cpu_ticks) - $1 + hz / 2) / hz))
}

# skip_step NAME REASON: records NAME as skipped.
skip_step() {
	_STEPS_SKIPPED+=("$1")
	echo "==> $1: skipped: $2"
}

# summary WHAT: prints the closing line and exits 1 if any step failed.
summary() {
	local what=$1 took=$((SECONDS - _STEPS_T0)) passed skipped=""
	passed=$(_join "${_STEPS_PASSED[@]}")
	if [ "${#_STEPS_SKIPPED[@]}" -ne 0 ]; then skipped="; skipped: $(_join "${_STEPS_SKIPPED[@]}")"; fi
	if [ "${#_STEPS_FAILED[@]}" -ne 0 ]; then
		echo "$what: FAILED after ${took}s. failed: $(_join "${_STEPS_FAILED[@]}"); passed: ${passed:-none}$skipped"
		return 1
	fi
	echo "$what: OK after ${took}s. passed: $passed$skipped"
}

_join() {
	local out="" x
	for x in "$@"; do out="${out:+$out, }$x"; done
	echo "$out"
}

# check_gofmt fails listing the Go files gofmt would change.
check_gofmt() {
	local bad
	bad=$(find . \( -name node_modules -o -path ./.git -o -path ./.build -o -path ./bin -o -path ./.local \) -prune -o \
		-name '*.go' -type f -print0 | xargs -0 -r gofmt -l)
	if [ -n "$bad" ]; then
		echo "gofmt: these files need formatting (run gofmt -w on them):"
		echo "$bad"
		return 1
	fi
}

# lint_template [TEMPLATE...] translates each TEMPLATE (template.yaml)
# with the SAM translator (the CloudFormation `sam deploy` submits) and
# runs cfn-lint, with this repository's rules (scripts/cfnlint_rules), on
# all of them and their translations in one run (one start of cfn-lint and
# its rules): on a SAM template cfn-lint skips its unknown-IAM-action
# (W3037) and unused-parameter (W2001) checks. It fails when any does.
lint_template() {
	local tpl out files=() failed=0
	[ $# -gt 0 ] || set -- template.yaml
	mkdir -p .build
	for tpl in "$@"; do
		out=.build/$(basename "$tpl" .yaml).translated.json
		files+=("$tpl")
		if python3 scripts/sam-translate.py "$tpl" >"$out"; then
			files+=("$out")
		else
			echo "sam-translate: $tpl does not translate (samtranslator ships with cfn-lint: pip install cfn-lint)"
			failed=1
		fi
	done
	cfn-lint "${files[@]}" --append-rules scripts/cfnlint_rules || failed=1
	return $failed
}

# build_test_bootstraps DIR PKG...: builds every PKG as a bootstrap for
# the local emulator into DIR, each named by the last element of its path
# (rie.PrebuiltName), in one go build, so the packages they share compile
# once. With -tags lambda.norpc as Lambda gets them, but with the build
# settings of the other non-race steps (the simulation, its mutations,
# infra), not Lambda's CGO_ENABLED=0 and -trimpath: either of those gives
# every package a different build ID (CGO_ENABLED changes net, and so
# everything that imports it), so the bootstraps would compile the AWS SDK
# a second time on a cold cache. The emulator runs them on this host, where
# a cgo build runs as well; what differs (the net package's DNS resolver)
# the tests do not use. make build and sam build keep Lambda's settings.
build_test_bootstraps() {
	local dir=$1
	shift
	mkdir -p "$dir"
	go build -tags lambda.norpc -ldflags=-w -o "$dir/" "$@"
}

# NORACE_PACKAGES: the packages make test tests without the race
# detector, because they start no goroutine and share no state (so it can
# find nothing there) and it makes their exhaustive tests four to nine
# times slower: infra (one goroutine generating and checking the
# templates) and internal/decide (a pure function, Of, checked over every
# combination of its inputs: 12 s of CPU without the detector, 53 s with).
NORACE_PACKAGES="infra internal/decide"

# go_test_packages prints the packages `make test` tests with the race
# detector (all but NORACE_PACKAGES), the slowest first: go test starts its builds
# and runs in the order it is given the packages, and these wait on the
# emulators for up to a minute (chaos), so they start while the quick
# ones keep the cores busy instead of running alone at the end.
go_test_packages() {
	local m slow p all
	m=$(go list -m)
	slow=(internal/chaos internal/sender cmd/sendonce examples internal/reconcile cmd/bench
		internal/provider/lambdaprovider internal/simtest functions/sender internal/ledger/dynamoledger)
	all=$(go list ./... | grep -Fxv -f <(printf "$m/%s\n" $NORACE_PACKAGES))
	# (one that is gone is left out: the order is only a hint)
	for p in "${slow[@]}"; do grep -Fx "$m/$p" <<<"$all" || true; done
	grep -Fxv -f <(printf "$m/%s\n" "${slow[@]}") <<<"$all"
}

# has_go_pkg DIR: true when DIR holds a Go package (a non-test .go file).
has_go_pkg() {
	compgen -G "$1/*.go" >/dev/null && ls "$1"/*.go | grep -qv '_test\.go$'
}

# require_cmd_dir DIR WHAT: exits with a message when ./DIR holds no Go
# package yet.
require_cmd_dir() {
	if ! has_go_pkg "$1"; then
		echo "$2: ./$1 does not exist yet, so there is nothing to run" >&2
		exit 1
	fi
}
