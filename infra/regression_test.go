package infra

import (
	"errors"
	"flag"
	"os"
	"slices"
	"testing"
)

// TestRedeliveryCounterexample is issue 21's defect 4: with MaxReceiveCount
// 2, a 180 s visibility timeout, a 180 s claim and a 30 s sender timeout,
// the last receive (180 s after the first) may come 180 s after a claim
// taken 30 s into the first invocation, which is still live: the message
// is dead-lettered as an unindexed first claim. The invariant must call
// these values broken, and the template's Rules must reject them.
func TestRedeliveryCounterexample(t *testing.T) {
	t.Parallel()
	tpl, p := setup(t)
	p = p.With("MaxReceiveCount", "2").With("QueueVisibilityTimeoutSeconds", "180").
		With("ClaimTimeoutSeconds", "180").With("SenderTimeoutSeconds", "30").
		With("MaximumBatchingWindowInSeconds", "0")
	inv := invariant(t, "RedeliveryOutlivesClaim")
	if err := inv.Check(p); !errors.Is(err, ErrInvariant) {
		t.Errorf("Check = %v, want ErrInvariant: the last receive lands on a live lease", err)
	}
	vs, err := tpl.Violations(p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(vs, "RedeliveryOutlivesClaim") {
		t.Errorf("the template's Rules reject %v, want RedeliveryOutlivesClaim among them", vs)
	}
}

var update = flag.Bool("update", false, "rewrite the generated parts of the repository (template Rules, template.yaml, the diagram) instead of comparing them")

// TestRedeliveryRule: the template's RedeliveryOutlivesClaim Rule is the
// one RedeliveryRule works out from the parameters' values (make
// template rewrites it after a change).
func TestRedeliveryRule(t *testing.T) {
	t.Parallel()
	tpl, _ := setup(t)
	want, err := tpl.RedeliveryRule()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		out, err := ReplaceBlock(string(data), RedeliveryRuleName, want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(templatePath, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := Block(string(data), RedeliveryRuleName); got != want {
		t.Errorf("%s's %s Rule is not the one the parameters' values give: run make template", templatePath, RedeliveryRuleName)
	}
}

// TestRedeliveryRuleSound: between the extremes TestInvariantsAtExtremes
// samples, every receive count and batching window the Rules accept
// holds RedeliveryOutlivesClaim too (the Rule counts a window other than
// 0 as the range's maximum, and decides counts from 12 on as holding).
func TestRedeliveryRuleSound(t *testing.T) {
	t.Parallel()
	tpl, _ := setup(t)
	inv := invariant(t, "RedeliveryOutlivesClaim")
	receives := []string{"2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "999"}
	windows := []string{"0", "1", "150", "299"}
	accepted := 0
	for _, q := range tpl.combinations([]string{"QueueVisibilityTimeoutSeconds", "SenderTimeoutSeconds", "ClaimTimeoutSeconds"}) {
		for _, n := range receives {
			for _, w := range windows {
				q := q.With("MaxReceiveCount", n).With("MaximumBatchingWindowInSeconds", w)
				vs, err := tpl.Violations(q)
				if err != nil {
					t.Fatal(err)
				}
				if len(vs) > 0 {
					continue
				}
				accepted++
				if err := inv.Check(q); err != nil {
					t.Errorf("the Rules accept %v", err)
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("the Rules accept no combination")
	}
	t.Logf("%d accepted combinations hold it", accepted)
}
