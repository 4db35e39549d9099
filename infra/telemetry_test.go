package infra

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/metrics"
)

// insightsQuery is the part of a CloudWatch Metrics Insights query the
// template's alarms and dashboard use (CloudWatch User Guide, "Metrics
// Insights query components and syntax"): SELECT FUNCTION(metric) FROM
// namespace, where a namespace with "/" or any character other than a
// letter, digit or underscore is in double quotes; WHERE label = 'value'
// [AND ...]; GROUP BY, ORDER BY and LIMIT, which change how the matched
// series are grouped, not which ones match.
var insightsQuery = regexp.MustCompile(`(?i)^SELECT\s+(AVG|COUNT|MAX|MIN|SUM)\((\w+)\)\s+FROM\s+("[^"]+"|\w+)` +
	`(?:\s+WHERE\s+(.+?))?(?:\s+GROUP\s+BY\s+[\w,\s]+?)?(?:\s+ORDER\s+BY\s+.+?)?(?:\s+LIMIT\s+\d+)?$`)

// whereEquals is one WHERE condition the evaluator understands.
var whereEquals = regexp.MustCompile(`^(\w+)\s*=\s*'([^']*)'$`)

// query is a parsed Metrics Insights query.
type query struct {
	metric, namespace string
	where             map[string]string
}

// parseQuery parses q, or says why the evaluator cannot: a query of
// another shape (SCHEMA, another operator, OR) must not be taken for one
// it evaluates wrongly; extend the evaluator with it.
func parseQuery(q string) (query, error) {
	m := insightsQuery.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return query{}, fmt.Errorf("not a query this evaluator understands (SELECT F(metric) FROM namespace [WHERE a = 'v' [AND ...]] [GROUP BY ...]): %q", q)
	}
	out := query{metric: m[2], namespace: strings.Trim(m[3], `"`), where: map[string]string{}}
	if m[4] != "" {
		for _, c := range regexp.MustCompile(`(?i)\s+AND\s+`).Split(m[4], -1) {
			w := whereEquals.FindStringSubmatch(strings.TrimSpace(c))
			if w == nil {
				return query{}, fmt.Errorf("WHERE condition %q: only label = 'value' is understood", c)
			}
			out.where[w[1]] = w[2]
		}
	}
	return out, nil
}

// matches returns how many of docs' metric values q reads: each EMF
// document's directive in q's namespace that defines q's metric, with
// every WHERE label equal (CloudWatch makes one data point per document
// and directive).
func (q query) matches(docs []map[string]any) int {
	n := 0
	for _, doc := range docs {
		dirs, _ := mapOf(doc["_aws"])["CloudWatchMetrics"].([]any)
		for _, d := range dirs {
			dir := mapOf(d)
			if dir["Namespace"] != q.namespace {
				continue
			}
			defined := false
			ms, _ := dir["Metrics"].([]any)
			for _, m := range ms {
				defined = defined || mapOf(m)["Name"] == q.metric
			}
			ok := defined && doc[q.metric] != nil
			for k, v := range q.where {
				ok = ok && doc[k] == v
			}
			if ok {
				n++
			}
		}
	}
	return n
}

// emitted returns the EMF documents a stack's functions print when each
// of names is counted once by every function, with the dimensions the
// code records (channel, provider), in namespace (metrics.StackNamespace
// of the stack, or metrics.Namespace outside one).
func emitted(t *testing.T, namespace string, names []string) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	for _, service := range []string{"sender", "reconciler", "reconcileworker", "webhook", "api", "sesevents"} {
		e := metrics.NewEMF(&buf, namespace, service)
		for _, n := range names {
			e.Count(n, 1, metrics.Dim{Name: "channel", Value: "sms"}, metrics.Dim{Name: "provider", Value: "sns"})
		}
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var docs []map[string]any
	for line := range strings.Lines(buf.String()) {
		if err := metrics.ValidateLine([]byte(line)); err != nil {
			t.Fatalf("CloudWatch would drop %s: %v", line, err)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	return docs
}

// stackReadings is what one generated stack reads from CloudWatch.
type stackReadings struct {
	// queries are its Metrics Insights queries, by where they are
	// (alarm name, or "Dashboard: <id>").
	queries map[string]string
	// problems are the reads that are not its own: an AWS/ metric whose
	// dimension names no resource of the stack, a custom metric outside
	// its namespace.
	problems []string
}

// accountWide are the alarms that read a metric of the whole account by
// nature, not of one stack: SES publishes its reputation rates
// (Reputation.BounceRate, Reputation.ComplaintRate) per account and
// Region only, with no dimension (Amazon SES Developer Guide,
// "Monitoring your sender reputation"), and SES acts on the account. Each
// stack sending through SES watches the same rates.
var accountWide = map[string]bool{"AWS/SES": true}

// readings resolves tpl's alarms and dashboard for the stack named stack
// (the parameters' defaults, pseudo parameters of one account and Region)
// and returns what they read.
func readings(t *testing.T, tpl *Template, stack string) stackReadings {
	t.Helper()
	pseudo := Pseudo{"AWS::StackName": stack, "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}
	out := stackReadings{queries: map[string]string{}}
	bad := func(format string, args ...any) { out.problems = append(out.problems, fmt.Sprintf(format, args...)) }
	own := metrics.StackNamespace(stack)
	for _, name := range slices.Sorted(maps.Keys(tpl.Resources)) {
		r := tpl.Resources[name]
		switch r["Type"] {
		case "AWS::CloudWatch::Alarm":
			v, err := tpl.Resolve(r["Properties"], tpl.Deployable(), pseudo)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			p := mapOf(v)
			ms, _ := p["Metrics"].([]any)
			for _, m := range ms {
				if e, ok := mapOf(m)["Expression"]; ok {
					s, ok := e.(string)
					if !ok {
						bad("%s: Expression %v is not text once resolved", name, e)
					}
					switch {
					case !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(s)), "SELECT"):
						// Metric math over the alarm's other ids (IF(requests >
						// 0, ...)): each of those is a MetricStat read below.
					case strings.Contains(s, `SCHEMA("AWS/`):
						// An AWS/ metric by Metrics Insights: its WHERE must name
						// one of the stack's own resources (<stack>-ledger).
						if !strings.Contains(s, "= '"+stack+"-") {
							bad("%s: %q reads an AWS/ metric of no resource of the stack", name, s)
						}
					default:
						out.queries[name+": "+fmt.Sprint(mapOf(m)["Id"])] = s
					}
				}
				if ms := mapOf(mapOf(m)["MetricStat"]); ms != nil {
					metricReads(bad, name, mapOf(ms["Metric"]), own)
				}
			}
			if p["MetricName"] != nil {
				metricReads(bad, name, p, own)
			}
		case "AWS::CloudWatch::Dashboard":
			v, err := tpl.Resolve(r["Properties"], tpl.Deployable(), pseudo)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			// Resolve fills in the pseudo parameters and leaves the Fn::Sub's
			// variables that name resources (${Queue}: !GetAtt ...) as they are.
			body := mapOf(v)["DashboardBody"]
			text, ok := body.(string)
			if !ok {
				t.Fatalf("%s: DashboardBody %v is not text once resolved", name, body)
			}
			vars := map[string]any{}
			if sub, _ := mapOf(mapOf(r["Properties"])["DashboardBody"])["Fn::Sub"].([]any); len(sub) == 2 {
				vars = mapOf(sub[1])
			}
			if strings.Contains(text, "${AWS::") {
				t.Fatalf("%s: a pseudo parameter is left in the body: %s", name, text)
			}
			var dash struct {
				Widgets []struct {
					Properties struct {
						Title   string  `json:"title"`
						Metrics [][]any `json:"metrics"`
					} `json:"properties"`
				} `json:"widgets"`
			}
			if err := json.Unmarshal([]byte(text), &dash); err != nil {
				t.Fatalf("%s: body is not JSON: %v", name, err)
			}
			for _, w := range dash.Widgets {
				for _, m := range w.Properties.Metrics {
					if len(m) == 1 {
						e := mapOf(m[0])
						q, _ := e["expression"].(string)
						out.queries[fmt.Sprintf("%s: %s", name, e["id"])] = q
						continue
					}
					// [namespace, metric, dimension, value, ...]: an AWS/ metric
					// of a resource the Fn::Sub's variables name.
					ns, _ := m[0].(string)
					dims := map[string]any{}
					for i := 2; i+1 < len(m); i += 2 {
						dims[fmt.Sprint(m[i])] = m[i+1]
					}
					if !strings.HasPrefix(ns, "AWS/") || len(dims) == 0 {
						bad("%s (%s): %v reads outside the stack's namespace %s", name, w.Properties.Title, m, own)
					}
					for k, val := range dims {
						s, _ := val.(string)
						vn, isVar := strings.CutPrefix(s, "${")
						vn, closed := strings.CutSuffix(vn, "}")
						if !isVar || !closed || stackResource(tpl, vars[vn]) == "" {
							bad("%s (%s): %s=%v names no resource of the stack", name, w.Properties.Title, k, val)
						}
					}
				}
			}
		}
	}
	return out
}

// metricReads checks one metric an alarm reads by name: in the stack's
// own namespace, or an AWS/ metric whose every dimension is a resource of
// the stack (accountWide namespaces excepted).
func metricReads(bad func(string, ...any), name string, m map[string]any, own string) {
	ns := fmt.Sprint(m["Namespace"])
	switch {
	case ns == own, accountWide[ns]:
	case strings.HasPrefix(ns, "AWS/"):
		dims, _ := m["Dimensions"].([]any)
		if len(dims) == 0 {
			bad("%s: %s %v has no dimension naming a resource of the stack", name, ns, m["MetricName"])
		}
		for _, d := range dims {
			v := mapOf(d)["Value"]
			if r := mapOf(v); r["Ref"] == nil && r["Fn::GetAtt"] == nil {
				bad("%s: %s dimension %v=%v names no resource of the stack", name, ns, mapOf(d)["Name"], v)
			}
		}
	default:
		bad("%s: namespace %s, not the stack's %s", name, ns, own)
	}
}

// stackResource returns the logical id v (a Ref or Fn::GetAtt) names,
// when it is a resource of tpl: "" otherwise.
func stackResource(tpl *Template, v any) string {
	m := mapOf(v)
	id, _ := m["Ref"].(string)
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
		id, _ = ga[0].(string)
	}
	if tpl.Resources[id] == nil {
		return ""
	}
	return id
}

// TestTelemetryScopedToStack generates each template for two stacks,
// "sendonce-prod" and "sendonce-staging", in one account and Region, and
// evaluates every Metrics Insights query of each one's alarms and
// dashboard against the EMF lines both stacks' functions print (and a
// library worker's, outside any stack): each query reads its own stack's
// data points and none of the other's. Every other metric an alarm or
// the dashboard reads is an AWS/ metric of one of the stack's resources.
func TestTelemetryScopedToStack(t *testing.T) {
	t.Parallel()
	stacks := []string{"sendonce-prod", "sendonce-staging"}
	for _, path := range []string{"../template.full.yaml", "../template.yaml", "../template.sar.yaml"} {
		t.Run(strings.TrimPrefix(path, "../"), func(t *testing.T) {
			t.Parallel()
			tpl, _ := load(t, path)
			read := map[string]stackReadings{}
			var names []string
			for _, s := range stacks {
				read[s] = readings(t, tpl, s)
				for _, p := range read[s].problems {
					t.Errorf("stack %s: %s", s, p)
				}
				for _, q := range read[s].queries {
					if pq, err := parseQuery(q); err == nil && !slices.Contains(names, pq.metric) {
						names = append(names, pq.metric)
					}
				}
			}
			if n := len(read[stacks[0]].queries); n < 20 {
				t.Fatalf("found %d Metrics Insights queries, want the alarms' and the dashboard's (at least 20): the scan is broken", n)
			}
			lines := map[string][]map[string]any{"(no stack)": emitted(t, metrics.Namespace, names)}
			for _, s := range stacks {
				lines[s] = emitted(t, metrics.StackNamespace(s), names)
			}
			for _, s := range stacks {
				for where, q := range read[s].queries {
					pq, err := parseQuery(q)
					if err != nil {
						t.Errorf("stack %s, %s: %v", s, where, err)
						continue
					}
					for emitter, docs := range lines {
						got := pq.matches(docs)
						if emitter == s && got == 0 {
							t.Errorf("stack %s, %s: %q reads none of its own stack's data points", s, where, q)
						}
						if emitter != s && got != 0 {
							t.Errorf("stack %s, %s: %q reads %d data points of %s", s, where, q, got, emitter)
						}
					}
				}
			}
		})
	}
}

// TestTelemetryCatchesAccountWideQuery: the test above fails on today's
// mistake, an alarm reading FROM sendonce (every stack of the account),
// on a dashboard query of another stack's namespace, and on an alarm of
// a queue that is not the stack's.
func TestTelemetryCatchesAccountWideQuery(t *testing.T) {
	t.Parallel()
	a, b := metrics.StackNamespace("a"), metrics.StackNamespace("b")
	names := []string{metrics.FencingLost}
	docs := map[string][]map[string]any{"a": emitted(t, a, names), "b": emitted(t, b, names), "none": emitted(t, metrics.Namespace, names)}
	for q, want := range map[string]map[string]int{
		`SELECT SUM(FencingLost) FROM sendonce`:                              {"a": 0, "b": 0, "none": 6},
		`SELECT SUM(FencingLost) FROM "sendonce/a"`:                          {"a": 6, "b": 0, "none": 0},
		`SELECT SUM(FencingLost) FROM "sendonce/b" WHERE service = 'sender'`: {"a": 0, "b": 1, "none": 0},
		`SELECT SUM(FencingLost) FROM "sendonce/a" GROUP BY provider`:        {"a": 6, "b": 0, "none": 0},
	} {
		pq, err := parseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		for emitter, n := range want {
			if got := pq.matches(docs[emitter]); got != n {
				t.Errorf("%q reads %d data points of %s, want %d", q, got, emitter, n)
			}
		}
	}
	for _, q := range []string{`SELECT SUM(FencingLost) FROM SCHEMA("sendonce/a", service)`, `SELECT SUM(FencingLost) FROM "sendonce/a" WHERE service != 'api'`} {
		if _, err := parseQuery(q); err == nil {
			t.Errorf("%q: parsed, want it refused (the evaluator does not understand it)", q)
		}
	}

	tpl, _ := load(t, "../template.full.yaml")
	tpl.Resources["FencingLostAlarm"]["Properties"].(map[string]any)["Metrics"].([]any)[0].(map[string]any)["Expression"] = "SELECT SUM(FencingLost) FROM sendonce"
	q := readings(t, tpl, "a").queries["FencingLostAlarm: q"]
	if pq, _ := parseQuery(q); pq.matches(docs["a"]) != 0 || pq.matches(docs["none"]) == 0 {
		t.Errorf("the broken alarm's query %q: want it to read outside stack a only", q)
	}
	tpl.Resources["QueueAgeAlarm"]["Properties"].(map[string]any)["Dimensions"] = []any{map[string]any{"Name": "QueueName", "Value": "someone-elses-queue"}}
	tpl.Resources["UncertainAttemptsAlarm"]["Properties"] = map[string]any{"Namespace": "sendonce", "MetricName": "UncertainAttempts"}
	if p := readings(t, tpl, "a").problems; len(p) != 2 {
		t.Errorf("problems %q, want the QueueAgeAlarm's foreign queue and UncertainAttemptsAlarm's namespace", p)
	}
}
