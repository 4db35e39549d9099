package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/testsupport"
)

// nodeDriver is the Powertools side of the peer section: bench/peer.mjs,
// started once and driven one JSON line per command.
type nodeDriver struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *json.Decoder
	stderr *testsupport.Buffer // written by the process, read on errors
	mu     sync.Mutex
}

// startNode starts node on dir/peer.mjs, killed when ctx ends. dir must
// hold the installed bench package (npm ci).
func startNode(ctx context.Context, dir string) (*nodeDriver, error) {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@aws-lambda-powertools", "idempotency")); err != nil {
		return nil, fmt.Errorf("%s has no node_modules/@aws-lambda-powertools/idempotency: run `npm ci --prefix %s` (make bench does)", dir, dir)
	}
	cmd := exec.CommandContext(ctx, "node", "peer.mjs")
	cmd.Dir = dir
	// The SDK must not look for real credentials or configuration files.
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1",
		"AWS_SDK_LOAD_CONFIG=0", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	d := &nodeDriver{cmd: cmd, in: in, out: json.NewDecoder(out), stderr: &testsupport.Buffer{}}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	return d, nil
}

// PID is the node process's id.
func (d *nodeDriver) PID() int { return d.cmd.Process.Pid }

// call sends one command and decodes its answer into out. ctx is
// startNode's: its end kills the process.
func (d *nodeDriver) call(ctx context.Context, cmd any, out any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("node: write command: %w (stderr: %s)", err, d.stderrText())
	}
	var answer json.RawMessage
	if err := d.out.Decode(&answer); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("node: read answer: %w (stderr: %s)", err, d.stderrText())
	}
	var status struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(answer, &status); err != nil {
		return fmt.Errorf("node: answer %q: %w", truncate(string(answer), 200), err)
	}
	if !status.OK {
		return fmt.Errorf("node: %s", status.Error)
	}
	return json.Unmarshal(answer, out)
}

func (d *nodeDriver) stderrText() string {
	return truncate(strings.TrimSpace(d.stderr.String()), 500)
}

// Close ends the script (stdin closed) and waits for it, killing it after
// 5 seconds.
func (d *nodeDriver) Close() error {
	_ = d.in.Close()
	kill := time.AfterFunc(5*time.Second, func() { _ = d.cmd.Process.Kill() })
	defer kill.Stop()
	return d.cmd.Wait()
}
