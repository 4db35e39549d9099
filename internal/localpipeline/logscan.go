package localpipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/redact"
)

// Forms of a Leak.
const (
	// LeakRaw: the address itself.
	LeakRaw = "raw"
	// LeakUnkeyed: the address's unkeyed token (UnkeyedToken), which
	// anyone can recompute by trying every number of an area code.
	LeakUnkeyed = "unkeyed token"
	// LeakOtherKey: an address token that is not the deployment key's
	// token of any workload address.
	LeakOtherKey = "token not made under the deployment's key"
	// LeakNoKeyLine: the instance never logged that its tokens are keyed
	// with the deployment's key (its redact_key_id).
	LeakNoKeyLine = "no start-up line with the deployment's redact_key_id"
	// LeakRandomKey: the instance logged that its tokens use a random key.
	LeakRandomKey = "address tokens use a random key"
)

// Leak is one way an instance's log output could expose an address.
type Leak struct {
	// Instance is the instance whose output held it ("sender-1", ...).
	Instance string
	// Form is one of the Leak* constants.
	Form string
	// Address is the workload's address concerned, when one is (raw and
	// unkeyed forms).
	Address string
	// Token is the token found (unkeyed and other-key forms).
	Token string
}

// String names the instance, the form and the address's kind, never the
// address (a report is output too).
func (l Leak) String() string {
	if l.Address == "" {
		return l.Instance + ": " + l.Form
	}
	kind, _, _ := strings.Cut(UnkeyedToken(l.Address), ":")
	return l.Instance + ": " + l.Form + " of a " + kind + " address"
}

// UnkeyedToken is the reversible form an address token must not have:
// redact's kind hint and the first 12 hex digits of the address's plain
// SHA-256 ("phone:3f2a9c01b7e4"). A token made with a per-deployment key
// never equals it.
func UnkeyedToken(addr string) string {
	kind, _, _ := strings.Cut(redact.Address(addr), ":")
	sum := sha256.Sum256([]byte(addr))
	return kind + ":" + hex.EncodeToString(sum[:6])
}

var (
	// tokenRE matches anything shaped like an address token of any
	// length, so an unkeyed token of the old 12-digit form is caught too.
	tokenRE    = regexp.MustCompile(`\b(?:phone|email|push|addr):[0-9a-f]{6,64}\b`)
	rawPhoneRE = regexp.MustCompile(`\+[0-9]{7,15}`)
	rawEmailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+`)
	wellFormed = regexp.MustCompile(`^(?:\+[0-9]{7,15}|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+)$`)
)

// Scan looks in every instance's log output (instance → output) for the
// ways it could expose an address of addrs, and returns them sorted by
// instance:
//
//   - the raw address;
//   - its unkeyed token (UnkeyedToken);
//   - with rd, the Redactor of the deployment's key: any other address
//     token that is not rd's token of one of addrs (made under another
//     key), no start-up line saying the instance's tokens are keyed with
//     rd's key (its redact_key_id), or a line saying they use a random
//     key. An instance with no output (never invoked: the emulator starts
//     a function on its first invocation) has nothing to expose.
//
// Well-formed phone numbers and email addresses are matched by pattern
// (fast for a large workload); any other address (an invalid request's)
// is searched for as it is.
func Scan(logs map[string]string, rd *redact.Redactor, addrs []string) []Leak {
	raw, unkeyed, keyed := map[string]string{}, map[string]string{}, map[string]bool{}
	var odd []string
	for _, a := range addrs {
		if a == "" {
			continue
		}
		unkeyed[UnkeyedToken(a)] = a
		if rd != nil {
			keyed[rd.Address(a)] = true
		}
		if wellFormed.MatchString(a) {
			raw[a] = a
		} else {
			odd = append(odd, a)
		}
	}
	var out []Leak
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		l := logs[name]
		seen := map[Leak]bool{}
		add := func(k Leak) {
			k.Instance = name
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		for _, re := range []*regexp.Regexp{rawPhoneRE, rawEmailRE} {
			for _, m := range re.FindAllString(l, -1) {
				if a, ok := raw[m]; ok {
					add(Leak{Form: LeakRaw, Address: a})
				}
			}
		}
		for _, a := range odd {
			if strings.Contains(l, a) {
				add(Leak{Form: LeakRaw, Address: a})
			}
		}
		for _, tok := range tokenRE.FindAllString(l, -1) {
			if a, ok := unkeyed[tok]; ok {
				add(Leak{Form: LeakUnkeyed, Address: a, Token: tok})
			} else if rd != nil && !keyed[tok] {
				add(Leak{Form: LeakOtherKey, Token: tok})
			}
		}
		if rd == nil || l == "" {
			continue // an instance never started wrote nothing to expose
		}
		// An instance that logged no token and no key line (its start-up
		// failed before the key was read, and it handled no work) exposes
		// nothing; one that logged either must show this deployment's key.
		started := strings.Contains(l, `"redact_key_id"`) || tokenRE.MatchString(l)
		if started && !strings.Contains(l, fmt.Sprintf(`"redact_key_id":%q`, rd.KeyID())) {
			add(Leak{Form: LeakNoKeyLine})
		}
		if strings.Contains(l, "address tokens use a random key") {
			add(Leak{Form: LeakRandomKey})
		}
	}
	return out
}
