#!/usr/bin/env bash
# Mutation runs of the deterministic simulation (docs/simulation.md,
# "Mutations"). Each patch in internal/simtest/testdata/mutations is a small
# defect put back into the product; the simulator must catch every one.
#
#   scripts/mutations.sh check PATCH...        each patch applies, everything compiles, simtest vets (make test)
#   scripts/mutations.sh catch SEEDS PATCH...  the simulator catches each within SEEDS seeds (make sim-mutations)
#   scripts/mutations.sh tests PATCH...        the tests of the packages a patch touches fail with it (make
#                                              tool-mutations: the checker's and the DynamoDB front's own
#                                              mutations, internal/{groundtruth,ddbfront}/testdata/mutations)
#
# A patch is never applied to the work tree: it is applied to a scratch
# copy of the files it touches, and the Go commands read the mutated files
# through -overlay. The packages keep their paths, so every package the
# patch does not reach comes from the build cache of the ordinary builds.
set -euo pipefail

root=$PWD
scratch=$(mktemp -d "${TMPDIR:-/tmp}/sendonce-mutations.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# overlay PATCH: applies PATCH to a scratch copy of its files and prints
# the path of an overlay file (go help build, -overlay) that swaps them in.
# Fails, saying why, when the patch does not apply.
overlay() {
	local p=$1 dir f json=""
	dir=$(mktemp -d "$scratch/p.XXXXXX")
	while IFS=$'\t' read -r _ _ f; do
		if [ -f "$root/$f" ]; then
			mkdir -p "$dir/$(dirname "$f")"
			cp "$root/$f" "$dir/$f"
		fi
	done < <(git apply --numstat "$p")
	(cd "$dir" && git apply "$p") || return 1
	while IFS=$'\t' read -r _ _ f; do
		local to=""
		[ -f "$dir/$f" ] && to=$dir/$f
		json+="${json:+,}\"$root/$f\":\"$to\""
	done < <(git apply --numstat "$p")
	printf '{"Replace":{%s}}\n' "$json" > "$dir/overlay.json"
	echo "$dir/overlay.json"
}

# check PATCH...: each patch applies and builds. Two at a time: each go
# vet is mostly one chain of compiles (the mutated package up to simtest),
# so one alone leaves a core idle. The lines come out in the patches' order.
check() {
	local failed=0 i=0 n=0 p
	for p in "$@"; do
		check_one "$p" >"$scratch/check.$i" 2>&1 &
		i=$((i + 1)) n=$((n + 1))
		if [ "$n" -ge "${MUTATION_JOBS:-2}" ]; then
			wait -n || true
			n=$((n - 1))
		fi
	done
	wait || true
	for ((p = 0; p < i; p++)); do
		cat "$scratch/check.$p"
		grep -q ': applies and builds$' "$scratch/check.$p" || failed=1
	done
	return $failed
}

# check_one PATCH: says whether PATCH applies and builds.
check_one() {
	local p=$1 name ov out err
	name=$(basename "$p" .patch)
	err=$scratch/err.$BASHPID
	if ! ov=$(overlay "$root/$p" 2>"$err"); then
		echo "mutation $name: the patch does not apply: $(head -3 "$err" | tr '\n' ' ')"
		return 1
	fi
	# go vet of the simulation compiles it and every package it runs
	# (the mutated ones among them), where the mutation must build.
	if ! out=$(go vet -overlay="$ov" ./internal/simtest 2>&1); then
		echo "mutation $name: applies but does not build:"
		echo "$out" | head -10
		return 1
	fi
	echo "mutation $name: applies and builds"
}

catch() {
	local seeds=$1 failed=0 p name ov out line n inv
	shift
	printf '| mutation | caught | seeds needed | invariant |\n|---|---|---:|---|\n'
	for p in "$@"; do
		name=$(basename "$p" .patch)
		if ! ov=$(overlay "$root/$p" 2>"$scratch/err"); then
			echo "| $name | patch does not apply | - | - |"
			head -3 "$scratch/err" >&2
			failed=1
			continue
		fi
		out=$(go test -overlay="$ov" -count=1 -timeout=0 -run 'TestSim$' ./internal/simtest -until-violation -seeds="$seeds" -v 2>&1 || true)
		line=$(grep -m1 '^CAUGHT after' <<<"$out" || true)
		if [ -n "$line" ]; then
			n=$(sed -E 's/^CAUGHT after ([0-9]+) seeds.*/\1/' <<<"$line")
			inv=$(sed -E 's/.*\): seed [0-9]+: ([a-z-]+) .*/\1/' <<<"$line")
			echo "| $name | yes | $n | $inv |"
		elif grep -q 'no violation in' <<<"$out"; then
			echo "| $name | NO (within $seeds seeds) | - | - |"
			failed=1
		else
			echo "| $name | does not build or run | - | - |"
			tail -5 <<<"$out" >&2
			failed=1
		fi
	done
	return $failed
}

# tests PATCH...: each patch must build and make the tests of the
# packages it touches fail (a test that passes with the defect is no test
# of it).
tests() {
	local failed=0 p name ov out pkgs
	for p in "$@"; do
		name=$(basename "$p" .patch)
		if ! ov=$(overlay "$root/$p" 2>"$scratch/err"); then
			echo "mutation $name: the patch does not apply: $(head -3 "$scratch/err" | tr '\n' ' ')"
			failed=1
			continue
		fi
		pkgs=$(git apply --numstat "$root/$p" | awk -F'\t' '{ n = split($3, a, "/"); d = "."; for (i = 1; i < n; i++) d = d "/" a[i]; print d }' | sort -u)
		# shellcheck disable=SC2086
		if ! out=$(go vet -overlay="$ov" $pkgs 2>&1); then
			echo "mutation $name: applies but does not build:"
			echo "$out" | head -10
			failed=1
			continue
		fi
		# shellcheck disable=SC2086
		if out=$(go test -overlay="$ov" -count=1 $pkgs 2>&1); then
			echo "mutation $name: NOT caught: the tests of $(echo $pkgs) pass with it"
			failed=1
			continue
		fi
		echo "mutation $name: caught by $(grep -m3 -oE -- '--- FAIL: [^ ]+' <<<"$out" | sed 's/--- FAIL: //' | tr '\n' ' ')"
	done
	return $failed
}

cmd=${1:-}
shift || true
case $cmd in
check) check "$@" ;;
catch) catch "$@" ;;
tests) tests "$@" ;;
*)
	echo "usage: scripts/mutations.sh check PATCH... | catch SEEDS PATCH... | tests PATCH..." >&2
	exit 2
	;;
esac
