#!/usr/bin/env bash
# Installs the AWS Lambda Runtime Interface Emulator into the project's
# bin/ (from the Go module proxy, built with the local Go toolchain), unless
# the pinned version is already there. Prints the binary's path.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODULE=github.com/aws/aws-lambda-runtime-interface-emulator
VERSION=${RIE_VERSION:-v0.0.0-20261030222936-bef5c4ba774d}
BIN=$ROOT/bin
RIE=$BIN/aws-lambda-rie

if [ -x "$RIE" ] && go version -m "$RIE" 2>/dev/null | grep -q "mod[[:space:]]*$MODULE[[:space:]]*$VERSION"; then
	echo "$RIE"
	exit 0
fi
echo "install-rie: installing aws-lambda-rie $VERSION into $BIN" >&2
mkdir -p "$BIN"
# Outside the module, so the project's go.mod neither constrains nor records it.
(cd "$BIN" && GOBIN="$BIN" GOFLAGS= go install "$MODULE/cmd/aws-lambda-rie@$VERSION") >&2
echo "$RIE"
