package localpipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Leak is an address found in a function's log output.
type Leak struct {
	// Instance is the instance whose output held it ("sender-1", ...).
	Instance string
	// Address is the workload's address that leaked.
	Address string
	// Form is "raw" (the address itself) or "unkeyed token" (the
	// unsalted SHA-256 prefix of the address, which anyone can recompute
	// by trying every number of an area code).
	Form string
}

// String names the instance, the form and the address's kind, never the
// address (a report is output too).
func (l Leak) String() string {
	kind, _, _ := strings.Cut(UnkeyedToken(l.Address), ":")
	return l.Instance + ": " + l.Form + " of a " + kind + " address"
}

// Summarize counts leaks per instance and form, one line each, for a
// report ("sender-1: 3 addresses as unkeyed token").
func Summarize(leaks []Leak) []string {
	n := map[string]int{}
	for _, l := range leaks {
		n[l.Instance+"\x00"+l.Form]++
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		inst, form, _ := strings.Cut(k, "\x00")
		out = append(out, fmt.Sprintf("%s: %d addresses as %s", inst, n[k], form))
	}
	return out
}

// UnkeyedToken is the reversible form an address token must not have: a
// kind hint and the first 12 hex digits of the address's plain SHA-256
// ("phone:3f2a9c01b7e4"). A token made with a per-deployment key never
// equals it.
func UnkeyedToken(addr string) string {
	kind := "addr"
	switch {
	case strings.HasPrefix(addr, "+"):
		kind = "phone"
	case strings.Contains(addr, "@"):
		kind = "email"
	case strings.HasPrefix(addr, "arn:"):
		kind = "push"
	}
	sum := sha256.Sum256([]byte(addr))
	return kind + ":" + hex.EncodeToString(sum[:6])
}

var (
	tokenRE    = regexp.MustCompile(`\b(?:phone|email|push|addr):[0-9a-f]{12}\b`)
	rawPhoneRE = regexp.MustCompile(`\+[0-9]{7,15}`)
	rawEmailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+`)
	wellFormed = regexp.MustCompile(`^(?:\+[0-9]{7,15}|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+)$`)
)

// ScanLogs looks for every address of addresses in every instance's log
// output (instance → output), raw or as its unkeyed token, and returns
// what it found, sorted by instance. Well-formed phone numbers and email
// addresses are matched by pattern (fast for a large workload); any other
// address (an invalid request's) is searched for as it is.
func ScanLogs(logs map[string]string, addresses []string) []Leak {
	raw, tokens := map[string]string{}, map[string]string{}
	var odd []string
	for _, a := range addresses {
		if a == "" {
			continue
		}
		tokens[UnkeyedToken(a)] = a
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
		add := func(addr, form string) {
			k := Leak{Instance: name, Address: addr, Form: form}
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		for _, re := range []*regexp.Regexp{rawPhoneRE, rawEmailRE} {
			for _, m := range re.FindAllString(l, -1) {
				if a, ok := raw[m]; ok {
					add(a, "raw")
				}
			}
		}
		for _, a := range odd {
			if strings.Contains(l, a) {
				add(a, "raw")
			}
		}
		for _, m := range tokenRE.FindAllString(l, -1) {
			if a, ok := tokens[m]; ok {
				add(a, "unkeyed token")
			}
		}
	}
	return out
}
