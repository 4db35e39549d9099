#!/usr/bin/env bash
# Non-test Go lines of the product and of its tooling (make loc; issue 23).
#
#   Lambdas   every package of this module that a functions/*/ main imports,
#             itself included (go list -deps ./functions/...)
#   CLI       the packages cmd/sendonce imports that no Lambda does
#   tooling   every other package of the module (harnesses, simulators,
#             benchmarks, the demo, infra's generators, examples), except
#   excluded  the conformance suites and in-memory fakes unit tests share
#             (*test packages that are suites or fakes, every mem* store)
#
# A package's lines are those of its non-test .go files for this platform
# (go list's GoFiles, with cgo and ignored files not counted), blank lines
# and comments included, as wc -l counts them.
# Usage: scripts/loc.sh [-v]   (-v: one line per package)
set -euo pipefail
verbose=${1:-}
mod=$(go list -m)
deps() { go list -deps -f '{{if .Module}}{{if eq .Module.Path "'"$mod"'"}}{{.ImportPath}}{{end}}{{end}}' "$@" | sort -u; }
lambdas=$(deps ./functions/...)
cli=$(comm -23 <(deps ./cmd/sendonce) <(echo "$lambdas"))
rest=$(comm -23 <(go list ./... | sort -u) <(sort -u <(echo "$lambdas") <(echo "$cli")))
# The conformance suites and in-memory fakes: what a unit test of several
# implementations shares, not a harness of its own.
excluded_re='/(idempotencytest|ratelimittest|apikeytest|ledgertest|rendertest|templatestest|deduptest|providertest|capabilitytest|smtptest|twiliotest|mem[a-z]+)$'
excluded=$(grep -E "$excluded_re" <<<"$rest" || true)
tooling=$(grep -vE "$excluded_re" <<<"$rest" || true)

lines() { # PKG...: non-test lines of each package, then their sum
	local total=0 n pkg
	for pkg in "$@"; do
		n=$(go list -f '{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}' "$pkg" | grep . | xargs -r cat | wc -l)
		total=$((total + n))
		[ "$verbose" = -v ] && printf '  %6d  %s\n' "$n" "${pkg#"$mod"/}" >&2
	done
	echo "$total"
}
group() { # NAME PKGS
	local n
	[ "$verbose" = -v ] && echo "$1:" >&2
	# shellcheck disable=SC2086
	n=$(lines $2)
	printf '%-10s %6d lines in %3d packages\n' "$1" "$n" "$(wc -w <<<"$2")"
}
group Lambdas "$lambdas"
group CLI "$cli"
group tooling "$tooling"
group excluded "$excluded"
