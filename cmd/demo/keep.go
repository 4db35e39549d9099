package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/notify"
)

// keepForLooking prepares the main run's resources, which the pipeline
// leaves in the emulators (Options.KeepResources), for a person to look
// at: the workload's invalid requests go through the sender once more
// (the run drained the dead-letter queue to count them), so that the
// dead-letter queue holds them with the sender's reasons; dir/demo.env
// exports the table, the queues and the redaction key for the CLI. It
// returns what prints the commands to look around.
func keepForLooking(ctx context.Context, p *localpipeline.Pipeline, w localpipeline.Workload, rep localpipeline.Report, dir string) (func(io.Writer), error) {
	var invalid []string
	for _, m := range w.Messages {
		if !m.Valid {
			invalid = append(invalid, m.Body)
		}
	}
	if err := p.Enqueue(ctx, invalid...); err != nil {
		return nil, err
	}
	dead := 0
	for deadline := time.Now().Add(30 * time.Second); ; {
		visible, inFlight, err := p.DLQDepth(ctx)
		if err != nil {
			return nil, err
		}
		if dead = visible + inFlight; dead >= len(invalid) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}

	// A message it sent, for inspect and find.
	var sent notify.Request
	var sentKey string
	for _, m := range w.Messages {
		if !m.Valid {
			continue
		}
		if _, state, err := p.Row(ctx, m.Key); err == nil && state == ledger.StateSent {
			if req, err := notify.Parse([]byte(m.Body)); err == nil {
				sent, sentKey = req, m.Key
				break
			}
		}
	}

	vars := [][2]string{
		{"SENDONCE_TABLE", p.Table},
		{"SENDONCE_QUEUE_URL", p.QueueURL},
		{"SENDONCE_DLQ_URL", p.DLQURL},
		{"SENDONCE_REDACT_KEY_PARAM", p.RedactKeyARN()},
	}
	var b strings.Builder
	b.WriteString("# Written by make demo KEEP=1 (cmd/demo -keep): the demo's table, queues and redaction key.\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", v[0], shellQuote(v[1]))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "demo.env"), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}

	// The list worth showing: FAILED rows (a scan), else another state
	// that has rows.
	state := "failed"
	for _, s := range []ledger.State{ledger.StateFailed, ledger.StateAbandoned, ledger.StateUncertain} {
		if rep.States[s] > 0 {
			state = strings.ToLower(string(s))
			break
		}
	}
	env := filepath.Join(dir, "env")
	return func(out io.Writer) {
		fmt.Fprintf(out, "\n==> local AWS is still running with this run's table %s (%d rows in state %s, %d SENT) and %d invalid requests in its dead-letter queue.\n",
			p.Table, rep.States[ledger.State(strings.ToUpper(state))], strings.ToUpper(state), rep.States[ledger.StateSent], dead)
		fmt.Fprintf(out, "    Look around (make services-stop stops it):\n\n")
		lines := [][2]string{
			{"source " + env, ""},
			{"bin/sendonce list --state " + state, "rows in state " + strings.ToUpper(state) + ", oldest first"},
		}
		if sentKey != "" {
			lines = append(lines,
				[2]string{"bin/sendonce inspect " + sentKey, "a message it sent: its ledger row"},
				[2]string{fmt.Sprintf("bin/sendonce find --tenant %s --event %s --output table", sent.TenantID, sent.EventID), "every row of that event"},
			)
		}
		lines = append(lines,
			[2]string{"bin/sendonce dlq list --output table", "the invalid requests the sender dead-lettered, with its reasons"},
			[2]string{"bin/sendonce dlq redrive --dry-run", "what a redrive would move back"},
			[2]string{"bin/sendonce list --state " + state + " --query '[].key' --output text", "the keys alone"},
			[2]string{"aws dynamodb describe-table --table-name " + p.Table + " --query Table.ItemCount", "the AWS CLI works too"},
		)
		width := 0
		for _, l := range lines {
			width = max(width, len(l[0]))
		}
		for _, l := range lines {
			if l[1] == "" {
				fmt.Fprintf(out, "    %s\n", l[0])
				continue
			}
			fmt.Fprintf(out, "    %-*s  # %s\n", width, l[0], l[1])
		}
	}, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
