#!/usr/bin/env bash
# Runs every fuzz target in the module (each `func FuzzXxx(f *testing.F)` in
# a _test.go file) for FUZZTIME (default 5s), one target at a time in its own
# package. Keeps going after a failure and exits 1 if any target failed; a
# crasher is saved under the package's testdata/fuzz/ as usual.
#
# Each package's fuzzing test binary is built once (go test -c -fuzz=.,
# two packages at a time: a link is single-threaded) and then run once per
# target as `go test -fuzz` runs it: in the package's directory, where it
# reads and writes testdata/fuzz, with go test's flags and its corpus
# directory in the build cache (fuzz/<import path> in go env GOCACHE), so
# the corpus accumulates across runs exactly as with go test. (go test
# -fuzz per target linked that binary once per target: 18 links for 14
# packages, about half of the step's time.)
#
# FUZZ_SLICES=N FUZZ_SLICE=K fuzzes only the packages whose place in the
# sorted list is K modulo N (make test: N=5, K the commit count modulo 5,
# so five consecutive commits fuzz every package once). Building a
# package's fuzzing binary instruments every package it imports, which
# on a cold build cache cost minutes for all 14; every target's seed
# corpus runs in the ordinary go test anyway.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
FUZZTIME=${FUZZTIME:-5s}

# The go command ignores testdata and directories starting with . or _.
mapfile -t targets < <(
	find . \( -name node_modules -o -name testdata -o -name '.?*' -o -name '_*' \) -prune -o \
		-name '*_test.go' -type f -print |
		sort |
		while read -r f; do
			sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(\s*[A-Za-z_][A-Za-z0-9_]* \*testing\.F\s*).*/\1/p' "$f" |
				while read -r name; do echo "$(dirname "$f") $name"; done
		done
)

if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz: no fuzz targets found"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/sendonce-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/log
cache=$(go env GOCACHE)

# The packages, each once, in the targets' order, with their import paths.
mapfile -t pkgs < <(for t in "${targets[@]}"; do echo "${t% *}"; done | awk '!seen[$0]++')

slices=${FUZZ_SLICES:-1} slice=${FUZZ_SLICE:-0}
if [ "$slices" -gt 1 ]; then
	mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | awk -v n="$slices" -v k="$((slice % slices))" '(NR - 1) % n == k')
	all=${#targets[@]}
	mapfile -t targets < <(for t in "${targets[@]}"; do
		for p in "${pkgs[@]}"; do [ "${t% *}" = "$p" ] && echo "$t"; done
	done)
	echo "fuzz: slice $((slice % slices)) of $slices: ${#targets[@]} of $all targets, in ${pkgs[*]} (the other slices fuzz on other commits; make fuzz runs every target)"
fi
declare -A importpath binary
i=0
while read -r dir path; do
	importpath[$dir]=$path
	binary[$dir]=$work/$i.test
	i=$((i + 1))
done < <(for dir in "${pkgs[@]}"; do echo "$dir $(go list -f '{{.ImportPath}}' "$dir")"; done)

# Build each package's binary; its build output is kept next to it.
for dir in "${pkgs[@]}"; do echo "$dir ${binary[$dir]}"; done |
	xargs -P 2 -L 1 sh -c 'go test -c -fuzz=. -o "$2" "$1" >"$2.build" 2>&1 || rm -f "$2"' _

failed=()
for t in "${targets[@]}"; do
	dir=${t% *}
	name=${t#* }
	bin=${binary[$dir]}
	echo "fuzz: $dir $name ($FUZZTIME)"
	if [ ! -x "$bin" ]; then
		echo "fuzz: $dir: the fuzzing test binary does not build:"
		cat "$bin.build"
		failed+=("$dir.$name")
		continue
	fi
	# Go 1.26's fuzzing coordinator can end a clean run with a bare
	# "context deadline exceeded" at the -fuzztime boundary on a loaded
	# machine (go.dev/issue/75804, fixed in Go 1.27): no input failed and
	# none was written. Such a run is retried once; any other failure, or
	# one that wrote a failing input, counts at once.
	for try in 1 2; do
		if (cd "$dir" && "$bin" -test.paniconexit0 -test.fuzzcachedir="$cache/fuzz/${importpath[$dir]}" \
			-test.timeout=10m0s -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$FUZZTIME") 2>&1 | tee "$log"; then
			break
		fi
		if [ "$try" -eq 1 ] && grep -q '^    context deadline exceeded$' "$log" &&
			! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"; then
			echo "fuzz: $dir $name: the coordinator's deadline race (go.dev/issue/75804), no failing input: running it again"
			continue
		fi
		failed+=("$dir.$name")
		break
	done
done

if [ "${#failed[@]}" -ne 0 ]; then
	echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}"
	exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${FUZZTIME} without a failure"
