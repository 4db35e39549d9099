package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/chaos"
	"github.com/sendonce/sendonce/internal/ledger"
)

// keepForLooking prepares a run's resources, which the lanes left in the
// emulators (chaos.Options.KeepResources, which also put the invalid
// requests back on the dead-letter queue with the sender's reasons), for
// a person to look at: dir/demo.env exports the http lane's table,
// queues and redaction key for the CLI; it then prints the commands to
// look around, and the other lanes' tables.
func keepForLooking(rep chaos.Report, moto, dir string, out io.Writer) error {
	if len(rep.Lanes) == 0 {
		return fmt.Errorf("no lane ran")
	}
	i := max(0, slices.IndexFunc(rep.Lanes, func(l chaos.LaneReport) bool { return l.Name == "http" }))
	l := rep.Lanes[i]
	// The lanes reached SQS through the run's front, gone now: name the
	// queues at moto_server.
	queue, dlq := atMoto(l.QueueURL, moto), atMoto(l.DLQURL, moto)
	vars := [][2]string{
		{"SENDONCE_TABLE", l.Table},
		{"SENDONCE_QUEUE_URL", queue},
		{"SENDONCE_DLQ_URL", dlq},
		{"SENDONCE_REDACT_KEY_PARAM", l.RedactKeyARN},
	}
	var b strings.Builder
	b.WriteString("# Written by make demo KEEP=1 (cmd/demo -keep): the demo's http lane's table, queues and redaction key.\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", v[0], shellQuote(v[1]))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "demo.env"), []byte(b.String()), 0o644); err != nil {
		return err
	}

	// The list worth showing: FAILED rows (a scan), else another state
	// that has rows.
	state := ledger.StateFailed
	for _, s := range []ledger.State{ledger.StateFailed, ledger.StateAbandoned, ledger.StateUncertain} {
		if l.States[s] > 0 {
			state = s
			break
		}
	}
	lower := strings.ToLower(string(state))
	fmt.Fprintf(out, "\n==> local AWS is still running with the %s lane's table %s (%d rows in state %s, %d SENT) and %d invalid requests in its dead-letter queue.\n",
		l.Name, l.Table, l.States[state], state, l.States[ledger.StateSent], l.DeadLettered)
	fmt.Fprintf(out, "    Look around (make services-stop stops it):\n\n")
	lines := [][2]string{
		{"source " + filepath.Join(dir, "env"), ""},
		{"bin/sendonce list --state " + lower, "rows in state " + string(state) + ", oldest first"},
	}
	if sent := l.Sent; sent.EventID != "" {
		lines = append(lines,
			[2]string{"bin/sendonce inspect " + sent.Key(), "a message it sent: its ledger row"},
			[2]string{fmt.Sprintf("bin/sendonce find --tenant %s --event %s --output table", sent.TenantID, sent.EventID), "every row of that event"},
		)
	}
	lines = append(lines,
		[2]string{"bin/sendonce dlq list --output table", "the invalid requests the sender dead-lettered, with its reasons"},
		[2]string{"bin/sendonce dlq redrive --dry-run", "what a redrive would move back"},
		[2]string{"bin/sendonce list --state " + lower + " --query '[].key' --output text", "the keys alone"},
		[2]string{"aws dynamodb describe-table --table-name " + l.Table + " --query Table.ItemCount", "the AWS CLI works too"},
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
	var others []string
	for _, o := range rep.Lanes {
		if o.Name != l.Name {
			others = append(others, fmt.Sprintf("%s %s", o.Name, o.Table))
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(out, "\n    The other lanes' tables (SENDONCE_TABLE=<table> bin/sendonce list --state failed, or abandoned): %s\n", strings.Join(others, ", "))
	}
	return nil
}

// atMoto returns queue URL u with moto_server's scheme and host.
func atMoto(u, moto string) string {
	q, err := url.Parse(u)
	m, err2 := url.Parse(moto)
	if err != nil || err2 != nil || u == "" {
		return u
	}
	q.Scheme, q.Host = m.Scheme, m.Host
	return q.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
