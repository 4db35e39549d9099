#!/usr/bin/env bash
# Checks the tools `make test` and `make demo` need. Prints one line with an
# install hint for each missing or too old tool, and exits 1 if any is.
set -uo pipefail

missing=0
miss() { # tool, what is wrong, hint
	printf 'prerequisite %s: %s -> %s\n' "$1" "$2" "$3" >&2
	missing=1
}

# version_ge A B: true when dotted version A >= B.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

if ! command -v go >/dev/null 2>&1; then
	miss go "not found" "install Go 1.26 or newer (official tarball into /usr/local/go, or your package manager) and put it on PATH"
else
	v=$(go env GOVERSION 2>/dev/null | sed 's/^go//; s/[^0-9.].*$//')
	version_ge "${v:-0}" 1.26 || miss go "version ${v:-unknown} < 1.26" "install Go 1.26 or newer"
fi

if ! command -v java >/dev/null 2>&1; then
	miss java "not found (DynamoDB Local needs it)" "apt-get install openjdk-17-jre-headless (any Java 17 or newer)"
else
	# "17.0.15", "21", or "1.8.0_392" for Java 8.
	v=$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)
	major=${v%%.*}
	[ "$major" = 1 ] && major=$(echo "$v" | cut -d. -f2)
	[ "${major:-0}" -ge 17 ] 2>/dev/null || miss java "version ${v:-unknown} < 17" "apt-get install openjdk-17-jre-headless (any Java 17 or newer)"
fi

if ! command -v node >/dev/null 2>&1; then
	miss node "not found" "apt-get install nodejs npm (Node 20 or newer)"
else
	v=$(node --version 2>/dev/null | sed 's/^v//')
	version_ge "${v:-0}" 20 || miss node "version ${v:-unknown} < 20" "install Node 20 or newer"
fi
command -v npm >/dev/null 2>&1 || miss npm "not found" "apt-get install npm (comes with Node 20+)"
command -v moto_server >/dev/null 2>&1 || miss moto_server "not found (local SQS/SNS/SSM)" "pip install 'moto[server]'"
command -v cfn-lint >/dev/null 2>&1 || miss cfn-lint "not found (template check)" "pip install cfn-lint"
command -v curl >/dev/null 2>&1 || miss curl "not found" "apt-get install curl"

# Only `make diagram` (which checks it again) needs Graphviz: a note, not a failure.
command -v dot >/dev/null 2>&1 || echo "note: Graphviz's dot is not installed; only make diagram needs it -> apt-get install graphviz" >&2

if [ "$missing" -ne 0 ]; then
	echo "prerequisites missing: install the tools above, then run make again" >&2
	exit 1
fi
echo "prerequisites OK: $(go env GOVERSION), java $(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1), node $(node --version), moto_server, cfn-lint, curl"
