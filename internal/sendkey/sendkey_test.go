package sendkey_test

import (
	"regexp"
	"testing"

	"github.com/sendonce/sendonce/internal/sendkey"
)

func TestDeriveVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		parts sendkey.Parts
		want  string
	}{
		{"SMS", sendkey.Parts{"acme", "evt_01J9Z3", "user-42", "sms", "order_shipped"}, "v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71"},
		{"Email", sendkey.Parts{"acme", "evt_01J9Z3", "user-42", "email", "order_shipped"}, "v1_6c00a0e84491fd2a583baf3a0da2017bbabe3a60e9826522cbe1abf446529b2f"},
		{"SeparatorInField", sendkey.Parts{"acme", "evt_1", "user|2", "sms", "otp"}, "v1_74842921e22b7f03e4199d1ad05fb49de67925e401cba699a9b02f5b999563a5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := sendkey.Derive(tt.parts)
			if got != tt.want {
				t.Errorf("Derive(%+v) = %s, want %s", tt.parts, got, tt.want)
			}
			if !sendkey.Valid(got) {
				t.Errorf("Valid(%s) = false", got)
			}
		})
	}
}

func TestDeriveUnambiguous(t *testing.T) {
	t.Parallel()
	a := sendkey.Derive(sendkey.Parts{"a|b", "c", "r", "sms", "t"})
	b := sendkey.Derive(sendkey.Parts{"a", "b|c", "r", "sms", "t"})
	c := sendkey.Derive(sendkey.Parts{"a", "bc", "r", "sms", "t"})
	d := sendkey.Derive(sendkey.Parts{"ab", "c", "r", "sms", "t"})
	seen := map[string]bool{}
	for _, k := range []string{a, b, c, d} {
		if seen[k] {
			t.Fatalf("key collision: %s", k)
		}
		seen[k] = true
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	good := sendkey.Derive(sendkey.Parts{"t", "e", "r", "sms", "x"})
	for _, s := range []string{"", "v1_", good[:len(good)-1], "v2" + good[2:], good[:10] + "G" + good[11:], good + "0"} {
		if sendkey.Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}

// keyRE is the key's documented shape: v1_ and 64 lowercase hex digits.
var keyRE = regexp.MustCompile(`^v1_[0-9a-f]{64}$`)

func FuzzDerive(f *testing.F) {
	f.Add("acme", "evt_01J9Z3", "user-42", "sms", "order_shipped")
	f.Add("", "", "", "", "")
	f.Add("a|b", "c", "\x00", "email", "otp")
	f.Fuzz(func(t *testing.T, tenant, event, rcpt, channel, tmpl string) {
		p := sendkey.Parts{tenant, event, rcpt, channel, tmpl}
		k := sendkey.Derive(p)
		if !sendkey.Valid(k) || !keyRE.MatchString(k) {
			t.Fatalf("Derive gave malformed key %q", k)
		}
		if k2 := sendkey.Derive(p); k2 != k {
			t.Fatalf("Derive not deterministic: %s vs %s", k, k2)
		}
		q := p
		q.Template += "x"
		if sendkey.Derive(q) == k {
			t.Fatalf("changing the template did not change the key")
		}
		q = p
		q.Tenant = "x" + q.Tenant
		if sendkey.Derive(q) == k {
			t.Fatalf("changing the tenant did not change the key")
		}
	})
}

func BenchmarkDerive(b *testing.B) {
	p := sendkey.Parts{"acme", "evt_01J9Z3", "user-42", "sms", "order_shipped"}
	b.ReportAllocs()
	for b.Loop() {
		sendkey.Derive(p)
	}
}
