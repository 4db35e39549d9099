#!/usr/bin/env bash
# Runs every fuzz target in the module (each `func FuzzXxx(f *testing.F)` in
# a _test.go file) for FUZZTIME (default 5s), one target at a time in its own
# package. Keeps going after a failure and exits 1 if any target failed; a
# crasher is saved under the package's testdata/fuzz/ as usual.
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

failed=()
for t in "${targets[@]}"; do
	dir=${t% *}
	name=${t#* }
	echo "fuzz: $dir $name ($FUZZTIME)"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$dir"; then
		failed+=("$dir.$name")
	fi
done

if [ "${#failed[@]}" -ne 0 ]; then
	echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}"
	exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${FUZZTIME} without a failure"
