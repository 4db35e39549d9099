package rie

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FunctionsDir is where Build looks for a function given by name.
const FunctionsDir = "functions"

// Build compiles the function package pkg as a linux bootstrap
// (GOOS=linux CGO_ENABLED=0 -tags lambda.norpc) once per test binary and
// returns its path. pkg is a function name under ./functions ("sender"),
// or a path relative to the module root ("./internal/rie/testdata/echo").
// A failed build fails t with the compiler's output.
//
// When SENDONCE_TEST_BOOTSTRAPS names a directory (make test builds every
// bootstrap there once, before go test starts: BootstrapsEnv), Build
// returns the one built there and fails t if it is missing, instead of
// building it again in each test binary that needs it. The build has no
// deadline of its own: on a busy machine a cold build can take minutes,
// and only go test's -timeout bounds it.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	if dir := os.Getenv(BootstrapsEnv); dir != "" {
		path := filepath.Join(dir, PrebuiltName(pkg))
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("rie: %s is not among the bootstraps built before the tests (%s=%s): add %s to TEST_BOOTSTRAPS in the Makefile",
				pkg, BootstrapsEnv, dir, pkg)
		}
		return path
	}
	build, _ := builds.LoadOrStore(pkg, sync.OnceValues(func() (string, error) {
		return buildCached(context.Background(), pkg)
	}))
	path, err := build.(func() (string, error))()
	if err != nil {
		t.Fatalf("rie: build %s: %v", pkg, err)
	}
	built.Store(path, pkg)
	return path
}

// BootstrapsEnv names the variable that points Build at a directory of
// bootstraps built beforehand, one file per package, named PrebuiltName.
const BootstrapsEnv = "SENDONCE_TEST_BOOTSTRAPS"

// PrebuiltName is the file name of pkg's bootstrap in the BootstrapsEnv
// directory: the last element of its path, as `go build -o dir/` names a
// command ("sender", "echo").
func PrebuiltName(pkg string) string { return filepath.Base(pkg) }

var builds sync.Map // pkg -> its build, a sync.OnceValues

var built sync.Map // path -> the pkg Build built there (functionOf)

// buildCached builds pkg into a per-package path under the system temp
// directory, replaced atomically, so repeated test runs reuse one file
// instead of leaving a new one behind each time.
func buildCached(ctx context.Context, pkg string) (string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root + "\x00" + pkg))
	dir := filepath.Join(os.TempDir(), "sendonce-rie", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, "bootstrap")
	tmp := final + "." + strconv.Itoa(os.Getpid()) // test binaries build at once
	if err := BuildBootstrap(ctx, root, pkg, tmp); err != nil {
		return "", err
	}
	return final, os.Rename(tmp, final)
}

// ModuleRoot returns the directory of the main module's go.mod, as the go
// command sees it from the current directory.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("rie: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("rie: not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// BuildBootstrap compiles pkg (a name under ./functions, or a path relative
// to root) in module root as a linux bootstrap at out, as Lambda gets it
// (CGO off, -tags lambda.norpc, -trimpath, -ldflags='-s -w'); env adds to
// go build's environment (GOARCH=arm64). It returns the compiler's output
// in the error when the build fails.
func BuildBootstrap(ctx context.Context, root, pkg, out string, env ...string) error {
	target := pkg
	if !strings.Contains(pkg, "/") {
		target = "./" + FunctionsDir + "/" + pkg
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, target)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", target, err, b)
	}
	return nil
}

// Start launches bootstrap under the emulator with env as the function's
// environment (AWS_LAMBDA_FUNCTION_NAME and AWS_LAMBDA_FUNCTION_TIMEOUT in
// env override Config's defaults), waits until it is ready, and registers
// a cleanup that stops the emulator and the function and fails t if a
// process is left. The function's output is logged when t fails. It fails
// t, with a hint, when SENDONCE_TEST_RIE is not set.
func Start(t testing.TB, bootstrap string, env map[string]string) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout+5*time.Second)
	defer cancel()
	inst, err := Launch(ctx, Config{Bootstrap: bootstrap, Env: env})
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("function output (%s):\n%s", filepath.Base(bootstrap), inst.Logs())
		}
		if err := inst.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return inst
}
