package infra

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RedeliveryRuleName is the template Rule that enforces invariant
// RedeliveryOutlivesClaim at deploy time.
const RedeliveryRuleName = "RedeliveryOutlivesClaim"

// RedeliveryRule returns the YAML of the Rule that makes CloudFormation
// reject every parameter combination breaking RedeliveryOutlivesClaim,
// (N−1)·V ≥ claim + sender timeout + batching window, which Rules cannot
// compute: it is the arithmetic worked out over the values the
// parameters may take.
//
// The visibility, sender and claim timeouts take AllowedValues; the
// receive count and the batching window take ranges. A receive count
// from 2 up to the first count at which every allowed combination holds
// (NoConstraintFrom) is decided exactly; any other allowed count is at
// least that one, so it holds. A batching window of 0 is decided exactly;
// any other is counted as the range's maximum (300 s), which is sound
// for every window and exact at the range's ends. A combination whose
// visibility does not cover six sender timeouts is left to Rule
// VisibilityCoversSenderTimeout, which rejects it.
func (t *Template) RedeliveryRule() (string, error) {
	vis, err1 := t.allowedInts(visibility)
	snd, err2 := t.allowedInts(senderTimeout)
	clm, err3 := t.allowedInts(claim)
	wmax, err4 := t.intProp(batchingWindow, "MaxValue")
	nmin, err5 := t.intProp(receives, "MinValue")
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			return "", err
		}
	}
	free := t.noConstraintFrom(vis, snd, clm, wmax)
	var b strings.Builder
	b.WriteString("  " + beginMarker(RedeliveryRuleName) + "\n")
	b.WriteString("  # from the parameters' AllowedValues and ranges (infra.RedeliveryRule); do not edit by hand.\n")
	fmt.Fprintf(&b, "  # MaxReceiveCount %d and more holds with every allowed value; a batching window other\n", free)
	fmt.Fprintf(&b, "  # than 0 is counted as %d s.\n", wmax)
	b.WriteString("  " + RedeliveryRuleName + ":\n    Assertions:\n")
	asserts := 0
	for _, v := range vis {
		var feasible []int
		for _, s := range snd {
			if s*VisibilityFactor <= v {
				feasible = append(feasible, s)
			}
		}
		for n := nmin; n < free; n++ {
			// The sender timeouts that allow the same claims, in order.
			type group struct{ c0, cw, ss []int }
			var groups []*group
			for _, s := range feasible {
				l := (n - 1) * v
				var c0, cw []int
				for _, c := range clm {
					if c+s <= l {
						c0 = append(c0, c)
					}
					if c+s+wmax <= l {
						cw = append(cw, c)
					}
				}
				if len(c0) == len(clm) && len(cw) == len(clm) {
					continue
				}
				i := slices.IndexFunc(groups, func(g *group) bool { return slices.Equal(g.c0, c0) && slices.Equal(g.cw, cw) })
				if i < 0 {
					i, groups = len(groups), append(groups, &group{c0: c0, cw: cw})
				}
				groups[i].ss = append(groups[i].ss, s)
			}
			for _, g := range groups {
				ss, c0, cw := g.ss, g.c0, g.cw
				terms := []string{
					fmt.Sprintf("!Not [!Equals [!Ref %s, %q]]", visibility, strconv.Itoa(v)),
					fmt.Sprintf("!Not [!Equals [!Ref %s, %q]]", receives, strconv.Itoa(n)),
				}
				if !slices.Equal(ss, feasible) {
					terms = append(terms, fmt.Sprintf("!Not [!Contains [%s, !Ref %s]]", quoted(ss), senderTimeout))
				}
				if cond := claimCondition(c0, cw, len(clm)); cond != "" {
					terms = append(terms, cond)
				}
				b.WriteString("      - Assert: !Or\n")
				for _, term := range terms {
					b.WriteString("          - " + term + "\n")
				}
				fmt.Fprintf(&b, "        AssertDescription: %q\n", redeliveryDescription(v, n, ss, c0, cw, wmax))
				asserts++
			}
		}
	}
	if asserts == 0 {
		return "", fmt.Errorf("%w: %s: no combination needs a rule (check the parameters' values)", ErrUnresolved, RedeliveryRuleName)
	}
	b.WriteString(end("  ", RedeliveryRuleName))
	return b.String(), nil
}

// noConstraintFrom returns the smallest receive count from which every
// combination of the allowed values holds the invariant, with any
// batching window up to wmax.
func (t *Template) noConstraintFrom(vis, snd, clm []int, wmax int) int {
	n := 2
	for _, v := range vis {
		smax := 0
		for _, s := range snd {
			if s*VisibilityFactor <= v {
				smax = max(smax, s)
			}
		}
		need := slices.Max(clm) + smax + wmax // ≤ (n−1)·v
		n = max(n, (need+v-1)/v+1)
	}
	return n
}

// claimCondition returns the condition on the claim timeout (and the
// batching window) a combination must meet: c0 are the claims allowed
// without a batching window, cw those allowed with one, of all claims;
// "" when none is allowed (the combination is rejected).
func claimCondition(c0, cw []int, all int) string {
	window0 := fmt.Sprintf("!Equals [!Ref %s, \"0\"]", batchingWindow)
	in := func(cs []int) string { return fmt.Sprintf("!Contains [%s, !Ref %s]", quoted(cs), claim) }
	switch {
	case len(c0) == 0:
		return ""
	case slices.Equal(c0, cw):
		return in(c0)
	case len(cw) == 0 && len(c0) == all:
		return window0
	case len(cw) == 0:
		return fmt.Sprintf("!And [%s, %s]", window0, in(c0))
	case len(c0) == all:
		return fmt.Sprintf("!Or [%s, %s]", window0, in(cw))
	}
	return fmt.Sprintf("!Or [!And [%s, %s], %s]", window0, in(c0), in(cw))
}

func redeliveryDescription(v, n int, ss, c0, cw []int, wmax int) string {
	most := func(cs []int) string {
		if len(cs) == 0 {
			return "no claim timeout"
		}
		return fmt.Sprintf("ClaimTimeoutSeconds %d at most", slices.Max(cs))
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = strconv.Itoa(s)
	}
	return fmt.Sprintf("(MaxReceiveCount - 1) x QueueVisibilityTimeoutSeconds must cover ClaimTimeoutSeconds + SenderTimeoutSeconds + MaximumBatchingWindowInSeconds:"+
		" with visibility %d, %d receives and SenderTimeoutSeconds %s, that allows %s without a batching window, %s with one (counted as %d s).",
		v, n, strings.Join(names, " or "), most(c0), most(cw), wmax)
}

// allowedInts returns parameter name's AllowedValues, sorted, as integers.
func (t *Template) allowedInts(name string) ([]int, error) {
	vals, ok := t.Parameters[name]["AllowedValues"].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: parameter %s has no AllowedValues", ErrUnresolved, name)
	}
	var out []int
	for _, v := range vals {
		s, _ := scalar(v)
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %s: AllowedValue %v", ErrUnresolved, name, v)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// intProp returns an integer property (MinValue, MaxValue) of a parameter.
func (t *Template) intProp(name, prop string) (int, error) {
	s, ok := scalar(t.Parameters[name][prop])
	n, err := strconv.Atoi(s)
	if !ok || err != nil {
		return 0, fmt.Errorf("%w: parameter %s has no integer %s", ErrUnresolved, name, prop)
	}
	return n, nil
}

// quoted returns xs as a YAML flow list of quoted strings.
func quoted(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Quote(strconv.Itoa(x))
	}
	return "[" + strings.Join(s, ", ") + "]"
}
