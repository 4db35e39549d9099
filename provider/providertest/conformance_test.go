package providertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/provider"
	"github.com/sendonce/sendonce/provider/providertest"
)

// memProvider is an in-memory provider that drops repeats of a key and
// can be asked about a key, with one defect switched on by name: the
// adapters Run must fail.
type memProvider struct {
	defect string

	mu  sync.Mutex
	got map[string][]string // key → the ids of the messages accepted
}

func (p *memProvider) Name() string { return "mem" }

func (p *memProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{IdempotentSends: true, LookupByReference: true}
}

func (p *memProvider) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	if err := ctx.Err(); err != nil {
		if p.defect == "permanent-on-cancel" {
			return provider.Receipt{}, &provider.Error{Kind: provider.Permanent, Provider: "mem", Op: "send", Reason: "cancelled"}
		}
		return provider.Receipt{}, &provider.Error{Kind: provider.Transient, Provider: "mem", Op: "send", Reason: "not sent: " + err.Error()}
	}
	if p.defect == "plain-error" && strings.HasPrefix(m.To, "bad") {
		return provider.Receipt{}, errors.New("refused")
	}
	if strings.HasPrefix(m.To, "bad") {
		return provider.Receipt{}, &provider.Error{Kind: provider.Permanent, Provider: "mem", Op: "send", Reason: "invalid recipient"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ids := p.got[m.Key]; len(ids) > 0 && p.defect != "resends" {
		return provider.Receipt{MessageID: ids[0]}, nil
	}
	id := fmt.Sprintf("m%d", len(p.got)+1)
	if p.defect == "resends" {
		id += fmt.Sprintf("-%d", len(p.got[m.Key]))
	}
	p.got[m.Key] = append(p.got[m.Key], id)
	if p.defect == "no-id" {
		id = ""
	}
	return provider.Receipt{MessageID: id}, nil
}

func (p *memProvider) Lookup(ctx context.Context, m provider.Message) (provider.LookupResult, error) {
	if err := ctx.Err(); err != nil && p.defect != "lookup-ignores-cancel" {
		return provider.LookupResult{}, &provider.Error{Kind: provider.Transient, Provider: "mem", Op: "lookup", Reason: err.Error()}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ids := p.got[m.Key]; len(ids) > 0 && strings.HasPrefix(m.To, "gone") && p.defect != "lookup-never-rejected" {
		return provider.LookupResult{Status: provider.LookupRejected, MessageID: ids[0], Reason: "undeliverable"}, nil
	}
	if ids := p.got[m.Key]; len(ids) > 0 && p.defect != "lookup-lies" && ctx.Err() == nil {
		return provider.LookupResult{Status: provider.LookupAccepted, MessageID: ids[0]}, nil
	}
	return provider.LookupResult{Status: provider.LookupNotFound}, nil
}

func (p *memProvider) received(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got[key])
}

// lossy presents p as a provider that accepts each message and then
// loses its answer: a 500 (then5xx) or a reply after the deadline. The
// adapter classifies that Ambiguous, or Transient with the defects
// "5xx-transient" and "timeout-transient".
type lossy struct {
	*memProvider
	then5xx bool
}

func (l lossy) Send(ctx context.Context, m provider.Message) (provider.Receipt, error) {
	if _, err := l.memProvider.Send(ctx, m); err != nil {
		return provider.Receipt{}, err
	}
	kind, code, reason := provider.Ambiguous, "500", "server error after the request was written"
	if l.then5xx {
		if l.defect == "5xx-transient" {
			kind = provider.Transient // the mistake: a 5xx is not proof that nothing was taken
		}
	} else {
		<-ctx.Done()
		code, reason = "", "no answer: "+ctx.Err().Error()
		if l.defect == "timeout-transient" {
			kind = provider.Transient
		}
	}
	return provider.Receipt{}, &provider.Error{Kind: kind, Provider: "mem", Op: "send", Code: code, Reason: reason}
}

func harness(defect string) providertest.Harness {
	p := &memProvider{defect: defect, got: map[string][]string{}}
	return providertest.Harness{
		New: func(*testing.T) provider.Adapter { return p },
		Message: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Channel: "sms", To: "+15551234567", Body: "hi"}
		},
		Received: func(_ *testing.T, key string) int { return p.received(key) },
		Refused: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Channel: "sms", To: "bad", Body: "hi"}
		},
		AcceptedThenFailed:   func(*testing.T) provider.Adapter { return lossy{p, true} },
		AcceptedThenTimedOut: func(*testing.T) provider.Adapter { return lossy{p, false} },
		Undeliverable: func(_ *testing.T, key string) provider.Message {
			return provider.Message{Key: key, Channel: "sms", To: "gone+15550000000", Body: "hi"}
		},
	}
}

// TestRunPasses: a provider that keeps the contract passes.
func TestRunPasses(t *testing.T) {
	providertest.Run(t, harness(""))
}

// TestRunCatchesDefects runs the suite, in a child process, against a
// provider with each defect, and requires it to fail with the check that
// names it: a suite that passes anything proves nothing.
func TestRunCatchesDefects(t *testing.T) {
	if d := os.Getenv("PROVIDERTEST_DEFECT"); d != "" {
		providertest.Run(t, harness(d))
		return
	}
	t.Parallel()
	for defect, want := range map[string]string{
		"resends":               "does not drop repeats",
		"no-id":                 "empty Receipt.MessageID",
		"lookup-lies":           "Lookup of a sent message",
		"lookup-ignores-cancel": "Lookup with a cancelled context",
		"permanent-on-cancel":   "cancelled context failed Permanent",
		"plain-error":           "is not a *provider.Error",
		"5xx-transient":         "accepted, then the answer lost (AcceptedThenFailed): Kind = transient, want ambiguous",
		"timeout-transient":     "accepted, then the answer lost (AcceptedThenTimedOut): Kind = transient, want ambiguous",
		"lookup-never-rejected": "Lookup of a message the provider failed for good",
	} {
		t.Run(defect, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestRunCatchesDefects$", "-test.count=1")
			cmd.Env = append(os.Environ(), "PROVIDERTEST_DEFECT="+defect)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a provider that %s:\n%s", defect, out)
			}
			if !strings.Contains(string(out), want) {
				t.Errorf("the suite failed without saying %q:\n%s", want, out)
			}
		})
	}
}
