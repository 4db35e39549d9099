package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// tokenRE matches a token as Address makes it.
var tokenRE = regexp.MustCompile(`^(?:phone|email|push|addr):[0-9a-f]{16}$`)

func TestAddress(t *testing.T) {
	t.Parallel()
	for in, prefix := range map[string]string{"+15551234567": "phone:", "ana@example.com": "email:", "arn:aws:sns:x": "push:", "token": "addr:"} {
		got := Address(in)
		if !strings.HasPrefix(got, prefix) || strings.Contains(got, in) || len(got) != len(prefix)+TokenHexLen || !tokenRE.MatchString(got) {
			t.Errorf("Address(%q) = %q", in, got)
		}
		if Address(in) != got {
			t.Errorf("Address(%q) is not stable", in)
		}
	}
	if Address("") != "" {
		t.Error("Address of empty is not empty")
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, to, want string }{
		{"The 'To' number +15551234567 is not valid", "+15551234567", "The 'To' number " + Address("+15551234567") + " is not valid"},
		{"rejected +44 20 7946 0958 and bob@example.org", "", "rejected [number] and [address]"},
		{"550 5.1.1 <ana@example.com>: user unknown", "ana@example.com", "550 5.1.1 <" + Address("ana@example.com") + ">: user unknown"},
		{"national 5551234567 number", "", "national [number] number"},
		{"250 2.0.0 OK queued as 12345", "", "250 2.0.0 OK queued as 12345"},
	}
	for _, tt := range tests {
		if got := Text(tt.in, tt.to); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Text(strings.Repeat("x", 300), ""); len(got) != maxText+len("…") {
		t.Errorf("Text did not cut a long text: %d bytes", len(got))
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	base := errors.New("send to +15551234567 failed")
	err := Error(fmt.Errorf("wrapped: %w", base), "+15551234567")
	if strings.Contains(err.Error(), "+15551234567") || !errors.Is(err, base) {
		t.Errorf("Error = %q (is base: %v)", err, errors.Is(err, base))
	}
	ue := &url.Error{Op: "Get", URL: "https://api.example/Messages.json?To=%2B15551234567", Err: errors.New("timeout")}
	if got := Error(ue, "+15551234567").Error(); got != "Get timeout" {
		t.Errorf("url error = %q, want the URL dropped", got)
	}
	if Error(nil, "x") != nil {
		t.Error("Error(nil) != nil")
	}
}

func mustNew(t *testing.T, key string) *Redactor {
	t.Helper()
	r, err := New([]byte(key))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

const (
	keyA = "deployment-a-0123456789abcdef0123456789abcdef"
	keyB = "deployment-b-0123456789abcdef0123456789abcdef"
)

// TestKeyedTokens: two deployments with different secrets give different
// tokens for the same address; the same secret gives the same token.
func TestKeyedTokens(t *testing.T) {
	t.Parallel()
	a, a2, b := mustNew(t, keyA), mustNew(t, keyA), mustNew(t, keyB)
	for _, addr := range []string{"+15551234567", "ana@example.com", "arn:aws:sns:us-east-1:1:endpoint/APNS/app/x"} {
		if a.Address(addr) != a2.Address(addr) {
			t.Errorf("same secret, different tokens for %s: %s, %s", addr, a.Address(addr), a2.Address(addr))
		}
		if a.Address(addr) == b.Address(addr) {
			t.Errorf("different secrets, same token for %s: %s", addr, a.Address(addr))
		}
		if r := NewRandom(); r.Address(addr) == a.Address(addr) || !r.Random() || a.Random() {
			t.Errorf("a random key gives the deployment's token, or Random is wrong")
		}
		if got, want := a.Text("to "+addr+" failed", addr), "to "+a.Address(addr)+" failed"; got != want {
			t.Errorf("Text = %q, want %q", got, want)
		}
		if got := a.Error(errors.New("to "+addr), addr).Error(); got != "to "+a.Address(addr) {
			t.Errorf("Error = %q", got)
		}
	}
	if a.KeyID() != a2.KeyID() || a.KeyID() == b.KeyID() || len(a.KeyID()) != 8 {
		t.Errorf("KeyID: %s %s %s", a.KeyID(), a2.KeyID(), b.KeyID())
	}
	if strings.Contains(a.KeyID(), keyA[:8]) {
		t.Errorf("KeyID %s shows the key", a.KeyID())
	}
	// The secret is copied: changing the caller's bytes changes nothing.
	k := []byte(keyA)
	c := mustNew(t, string(k))
	before := c.Address("+15551234567")
	k[0] = 'X'
	if c.Address("+15551234567") != before {
		t.Error("Redactor shares its caller's key bytes")
	}
}

func TestNewRejectsShortKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"", "short", strings.Repeat("k", MinKeyLen-1)} {
		if _, err := New([]byte(k)); err == nil || (k != "" && strings.Contains(err.Error(), k)) {
			t.Errorf("New(%d bytes) = %v, want an error that does not show the key", len(k), err)
		}
	}
}

// unkeyedToken is the scheme Address used before: the first 12 hex
// digits of an unkeyed SHA-256 of the address.
func unkeyedToken(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "phone:" + hex.EncodeToString(sum[:6])
}

// bruteForce hashes every number of one exchange (10^4 numbers; a whole
// area code, 10^7, takes seconds), as an attacker holding a log line
// would, and returns the one whose token is token under hash.
func bruteForce(token string, hash func(string) string) (string, bool) {
	for n := range 10000 {
		cand := fmt.Sprintf("+1555120%04d", n)
		if hash(cand) == token {
			return cand, true
		}
	}
	return "", false
}

// TestTokensResistBruteForce: an unkeyed token is reversed by hashing
// every candidate number; a keyed token is not (not by the unkeyed hash,
// nor by HMAC under guessed keys), only by someone holding the secret.
func TestTokensResistBruteForce(t *testing.T) {
	t.Parallel()
	const victim = "+15551204567"
	if got, ok := bruteForce(unkeyedToken(victim), unkeyedToken); !ok || got != victim {
		t.Fatalf("the old scheme was not reversed (%q, %v): the brute force does not work", got, ok)
	}
	a := mustNew(t, keyA)
	token := a.Address(victim)
	if token == unkeyedToken(victim) || strings.HasSuffix(token, unkeyedToken(victim)[len("phone:"):]) {
		t.Fatalf("keyed token %s equals the unkeyed one", token)
	}
	unkeyed16 := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "phone:" + hex.EncodeToString(sum[:])[:TokenHexLen]
	}
	if got, ok := bruteForce(token, unkeyed16); ok {
		t.Errorf("keyed token reversed by an unkeyed hash: %s", got)
	}
	for _, guess := range []string{strings.Repeat("\x00", MinKeyLen), strings.Repeat("sendonce", 4), keyB} {
		g := mustNew(t, guess)
		if got, ok := bruteForce(token, g.Address); ok {
			t.Errorf("keyed token reversed under a guessed key: %s", got)
		}
	}
	if got, ok := bruteForce(token, a.Address); !ok || got != victim {
		t.Errorf("with the secret, the token is not found again (%q, %v): tokens do not correlate", got, ok)
	}
}

// TestDefault: the package-level functions use the Redactor SetDefault
// installs. Not parallel: it changes the default.
func TestDefault(t *testing.T) {
	old := Default()
	t.Cleanup(func() { SetDefault(old) })
	if !old.Random() {
		t.Fatal("the default before SetDefault is not a random key")
	}
	a := mustNew(t, keyA)
	SetDefault(a)
	SetDefault(nil)
	if Default() != a || Address("+15551234567") != a.Address("+15551234567") {
		t.Errorf("Address does not use the default Redactor")
	}
	if got, want := Text("x ana@example.com", "ana@example.com"), a.Text("x ana@example.com", "ana@example.com"); got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	if got, want := Error(errors.New("+15551234567"), "+15551234567").Error(), a.Address("+15551234567"); got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
}

func BenchmarkAddress(b *testing.B) {
	r := NewRandom()
	b.ReportAllocs()
	for b.Loop() {
		r.Address("+15551234567")
	}
}
