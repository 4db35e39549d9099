// Command iamreport sums up what the IAM front (package iamfront)
// recorded in the processes of a test run (SENDONCE_TEST_IAM_REPORT) and
// prints, per role: the calls evaluated, the calls denied, and every
// grant no call exercised, each with the setting that needs it from
// docs/deploy.md ("Grants the local runs do not exercise"). It exits 1
// when a call was denied or an unexercised grant is not accounted for
// there. make iam-check runs it.
//
//	go run ./internal/iamfront/iamreport -dir .local/iam -deploy docs/deploy.md
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/iamfront"
)

func main() {
	dir := flag.String("dir", ".local/iam", "the directory the processes wrote their figures to (SENDONCE_TEST_IAM_REPORT)")
	deploy := flag.String("deploy", "docs/deploy.md", "the document that accounts for the grants no call exercises")
	flag.Parse()
	os.Exit(run(os.Stdout, *dir, *deploy))
}

// accounted reads the table of grants the local runs do not exercise:
// rows "| Role | Sid | action | needed when |" (Role "every role" for
// all), keyed "Role Sid action".
func accounted(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.Contains(line, "Grants the local runs do not exercise")
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
			if i < 3 {
				cells[i] = strings.Trim(cells[i], "`")
			}
		}
		if cells[0] == "Role" || strings.HasPrefix(cells[0], "-") {
			continue
		}
		out[cells[0]+" "+cells[1]+" "+cells[2]] = cells[3]
	}
	return out, sc.Err()
}

func run(w io.Writer, dir, deploy string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		fmt.Fprintf(w, "iam-check: no figures in %s: did the tests run with %s set?\n", dir, iamfront.EnvReport)
		return 1
	}
	sum := map[string]*iamfront.RoleStats{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(w, "iam-check:", err)
			return 1
		}
		var m map[string]iamfront.RoleStats
		if err := json.Unmarshal(b, &m); err != nil {
			fmt.Fprintf(w, "iam-check: %s: %v\n", f, err)
			return 1
		}
		for role, s := range m {
			t := sum[role]
			if t == nil {
				t = &iamfront.RoleStats{Denied: map[string]int{}, Grants: map[string]bool{}, Used: map[string]bool{}}
				sum[role] = t
			}
			for _, fn := range s.Functions {
				if !slices.Contains(t.Functions, fn) {
					t.Functions = append(t.Functions, fn)
				}
			}
			t.Evaluated += s.Evaluated
			for k, v := range s.Denied {
				t.Denied[k] += v
			}
			for k := range s.Grants {
				t.Grants[k] = true
			}
			for k := range s.Used {
				t.Used[k] = true
			}
		}
	}
	why, err := accounted(deploy)
	if err != nil {
		fmt.Fprintln(w, "iam-check:", err)
		return 1
	}
	roles := make([]string, 0, len(sum))
	for r := range sum {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	rc := 0
	fmt.Fprintf(w, "%-34s %-16s %10s %7s %8s %8s\n", "role", "functions", "evaluated", "denied", "grants", "unused")
	for _, r := range roles {
		s := sum[r]
		denied := 0
		for _, n := range s.Denied {
			denied += n
		}
		unused := 0
		for g := range s.Grants {
			if !s.Used[g] {
				unused++
			}
		}
		slices.Sort(s.Functions)
		fmt.Fprintf(w, "%-34s %-16s %10d %7d %8d %8d\n", r, strings.Join(s.Functions, ","), s.Evaluated, denied, len(s.Grants), unused)
	}
	for _, r := range roles {
		s := sum[r]
		fmt.Fprintf(w, "\n%s (%s)\n", r, strings.Join(s.Functions, ", "))
		var denied []string
		for k := range s.Denied {
			denied = append(denied, k)
		}
		slices.Sort(denied)
		for _, k := range denied {
			fmt.Fprintf(w, "  DENIED x%d: %s\n", s.Denied[k], k)
			rc = 1
		}
		var grants []string
		for g := range s.Grants {
			grants = append(grants, g)
		}
		slices.Sort(grants)
		for _, g := range grants {
			if s.Used[g] {
				fmt.Fprintf(w, "  exercised: %s\n", g)
				continue
			}
			if strings.Contains(r, "+") {
				// A combination of roles no template deploys (the
				// library's inline reconciler): its own roles' rows
				// account for their grants.
				fmt.Fprintf(w, "  unused: %s (see the roles it combines)\n", g)
				continue
			}
			reason, ok := why[r+" "+g]
			if !ok {
				reason, ok = why["every role "+g]
			}
			if !ok {
				fmt.Fprintf(w, "  UNUSED, not accounted for in %s: %s\n", deploy, g)
				rc = 1
				continue
			}
			fmt.Fprintf(w, "  unused: %s (%s)\n", g, reason)
		}
	}
	if rc != 0 {
		fmt.Fprintln(w, "\niam-check: FAIL (a denied call, or a grant no call exercised that docs/deploy.md does not account for)")
	} else {
		fmt.Fprintln(w, "\niam-check: OK (0 denied; every unexercised grant accounted for in "+deploy+")")
	}
	return rc
}
