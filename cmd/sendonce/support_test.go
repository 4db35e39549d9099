package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/provider/simulator"
	"github.com/sendonce/sendonce/notify"
)

// TestSupportLookup sends a small workload through the real local
// pipeline (sender and reconciler under the Lambda RIE, SQS in moto_server,
// the ledger in DynamoDB Local, the provider simulator), every message
// enqueued twice and two of them rejected by the provider, then answers
// "did this recipient get it?" with find, for every message, and checks
// the answer against the provider's ground truth. It also runs every EMF
// line the functions printed through metrics.ValidateLine: CloudWatch
// would accept them all. The verdict over whole runs (nothing twice,
// nothing lost, under faults) is the chaos lanes' (TestChaosSmall) and
// make demo's.
func TestSupportLookup(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := localpipeline.StartTest(t, localpipeline.Options{SenderInstances: 2, Simulator: simulator.Options{Seed: 11}})
	w := localpipeline.NewWorkload(localpipeline.WorkloadOptions{N: 16, Seed: 11, Permanent: 0.125})
	var bodies []string
	for _, m := range w.Messages {
		if m.Fault.Kind != "" {
			p.Simulator().AddFault(m.Fault)
		}
		bodies = append(bodies, m.Body, m.Body)
	}
	if err := p.Enqueue(ctx, bodies...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, m := range w.Messages {
		for {
			_, state, err := p.Row(ctx, m.Key)
			if err == nil && state.Final() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %s (%v) after 2 minutes", m.Key, state, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	emf, invalid := 0, 0
	for fn, logs := range p.Logs() {
		m := localpipeline.ParseEMF(logs)
		emf += m.Documents + len(m.Invalid)
		invalid += len(m.Invalid)
		for _, bad := range m.Invalid {
			t.Errorf("%s: CloudWatch would reject: %s", fn, bad)
		}
	}
	if emf == 0 {
		t.Error("the functions printed no EMF document")
	}
	t.Logf("%d EMF documents, %d invalid", emf, invalid)

	ids := map[string]string{} // reference → provider message id
	for _, m := range p.Simulator().Messages() {
		ids[m.Reference] = m.ID
	}
	vars := localVars(t, p.Table)
	checked := 0
	for _, m := range w.Messages {
		if !m.Valid {
			continue
		}
		req, err := notify.Parse([]byte(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		r := runWith(t, vars, "", "find", "--tenant", req.TenantID, "--event", req.EventID, "--recipient", req.Recipient.ID,
			"--channel", string(req.Channel), "--template", req.Template)
		if r.code != 0 {
			t.Errorf("find %s/%s: exit %d %s", req.EventID, req.Recipient.ID, r.code, r.stderr)
			continue
		}
		var row rowView
		if err := json.Unmarshal([]byte(r.stdout), &row); err != nil {
			t.Fatal(err)
		}
		delivered := p.Simulator().Delivered(m.Key)
		switch {
		case row.Key != m.Key:
			t.Errorf("find answered row %s, want %s", row.Key, m.Key)
		case m.WantFailed && (row.State != "FAILED" || delivered != 0):
			t.Errorf("%s: find says %s; the provider delivered it %d times; want FAILED and 0", m.Key, row.State, delivered)
		case !m.WantFailed && (row.State != "SENT" || delivered != 1 || row.ProviderMessageID != ids[m.Key] || row.ProviderMessageID == ""):
			t.Errorf("%s: find says %s with provider id %q; the provider delivered it %d times with id %q; want SENT, 1, the same id",
				m.Key, row.State, row.ProviderMessageID, delivered, ids[m.Key])
		}
		if row.EventID != req.EventID || strings.Contains(r.stdout, m.Address) {
			t.Errorf("%s: event %q (want %q), or a raw address in %s", m.Key, row.EventID, req.EventID, r.stdout)
		}
		all := runWith(t, vars, "", "find", "--tenant", req.TenantID, "--event", req.EventID)
		if rows := lines(t, all.stdout); len(rows) != 1 || rows[0]["key"] != m.Key {
			t.Errorf("find --event %s = %v, want its one row", req.EventID, keys(rows))
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no valid message to look up")
	}
}
