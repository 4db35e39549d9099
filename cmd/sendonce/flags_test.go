package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/testenv"
	"go.yaml.in/yaml/v3"
)

// runTerminal is runWith with stderr taken for a terminal, as it is for
// an operator: the progress line is drawn there.
func runTerminal(t testing.TB, vars map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, errTerminal: true,
		getenv: func(k string) string { return vars[k] }, loadAWS: loadFromVars(vars)}
	code := runEnv(context.Background(), e, args)
	return result{code, stdout.String(), stderr.String()}
}

// listBundle is a table with three UNCERTAIN rows and two FAILED rows.
type listBundle struct {
	bundle
	uncertain, failed []ledger.Entry
}

func setupList(t *testing.T) listBundle {
	t.Helper()
	b := setup(t)
	s := b.seeder(t)
	base := time.Now().Add(-time.Hour)
	lb := listBundle{bundle: b}
	for i, tenant := range []string{"acme", "globex", "acme"} {
		lb.uncertain = append(lb.uncertain, s.row(entry(tenant, "q"+string(rune('1'+i)), "r", "sms"), base.Add(time.Duration(i)*time.Minute), time.Minute, ledger.StateUncertain, "timeout"))
	}
	for i := range 2 {
		lb.failed = append(lb.failed, s.row(entry("acme", "f"+string(rune('1'+i)), "r", "sms"), base.Add(time.Duration(i)*time.Minute), time.Minute, ledger.StateFailed, "rejected"))
	}
	return lb
}

// TestGlobalFlagsEitherPosition: --region, --endpoint-url, --output and
// --query work before the command, after it, between its arguments and
// in --flag=value form, as in the AWS CLI; so does --profile.
func TestGlobalFlagsEitherPosition(t *testing.T) {
	t.Parallel()
	lb := setupList(t)
	key := lb.uncertain[0].Key
	// Neither region nor endpoint in the environment: only the flags
	// reach DynamoDB Local.
	vars := map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "SENDONCE_TABLE": lb.table}
	region, ep := testenv.Region, testenv.DynamoDBEndpoint(t)
	for name, args := range map[string][]string{
		"Before":      {"--region", region, "--endpoint-url", ep, "--output", "text", "--query", "state", "inspect", key},
		"After":       {"inspect", key, "--region", region, "--endpoint-url", ep, "--output", "text", "--query", "state"},
		"Mixed":       {"--output", "text", "inspect", "--region", region, key, "--endpoint-url", ep, "--query", "state"},
		"EqualsForm":  {"--region=" + region, "--endpoint-url=" + ep, "inspect", "--output=text", "--query=state", key},
		"TableBefore": {"--table", lb.table, "--region", region, "inspect", key, "--endpoint-url", ep, "--output", "text", "--query", "state"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runWith(t, vars, "", args...)
			if r.code != exitOK || r.stdout != "UNCERTAIN\n" || r.stderr != "" {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want UNCERTAIN alone", args, r.code, r.stdout, r.stderr)
			}
		})
	}
	t.Run("ListBeforeAndAfter", func(t *testing.T) {
		t.Parallel()
		before := runWith(t, vars, "", "--region", region, "--endpoint-url", ep, "--output", "json", "list", "--state", "uncertain")
		after := runWith(t, vars, "", "list", "--state", "uncertain", "--region", region, "--endpoint-url", ep, "--output", "json")
		if before.code != exitOK || before.stdout == "" || len(okRows(t, before)) != 3 {
			t.Fatalf("before: exit %d %q %q", before.code, before.stdout, before.stderr)
		}
		// Ages tick between the two runs; the keys and states do not.
		if got, want := keys(okRows(t, after)), keys(okRows(t, before)); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("after the command: keys %q, want %q", got, want)
		}
	})
	t.Run("Profile", func(t *testing.T) {
		t.Parallel()
		// No config files here (loadFromVars): the profile is not found,
		// whichever side of the command names it.
		want := `AWS profile "nope" is not in the AWS config files`
		oneLineError(t, runWith(t, lb.vars, "", "--profile", "nope", "inspect", key), want)
		oneLineError(t, runWith(t, lb.vars, "", "inspect", key, "--profile", "nope"), want)
	})
}

// TestQuery: --query is JMESPath over the JSON result (a list as an
// array), printed in the --output format.
func TestQuery(t *testing.T) {
	t.Parallel()
	lb := setupList(t)
	u := lb.uncertain
	tests := []struct {
		name string
		args []string
		want string // stdout, exactly
	}{
		{"Keys", []string{"list", "--state", "uncertain", "--query", "[].key"},
			"[\n  \"" + u[0].Key + "\",\n  \"" + u[1].Key + "\",\n  \"" + u[2].Key + "\"\n]\n"},
		{"KeysText", []string{"list", "--state", "uncertain", "--query", "[].key", "--output", "text"},
			u[0].Key + "\n" + u[1].Key + "\n" + u[2].Key + "\n"},
		{"Filter", []string{"list", "--state", "uncertain", "--query", "[?tenant=='globex'].key", "--output", "text"}, u[1].Key + "\n"},
		{"Length", []string{"list", "--state", "uncertain", "--query", "length(@)", "--output", "text"}, "3\n"},
		{"EmptyList", []string{"list", "--state", "abandoned", "--query", "[].key"}, "[]\n"},
		{"NullText", []string{"list", "--state", "abandoned", "--query", "[0].key", "--output", "text"}, ""},
		{"Object", []string{"inspect", u[0].Key, "--query", "{state: state, tenant: tenant}", "--output", "text"}, "state\tUNCERTAIN\ntenant\tacme\n"},
		{"ObjectJSON", []string{"inspect", u[0].Key, "--query", "[state, attempts]"}, "[\n  \"UNCERTAIN\",\n  1\n]\n"},
		{"Table", []string{"list", "--state", "failed", "--query", "[].{key: key, why: reason}", "--output", "table"},
			"KEY" + strings.Repeat(" ", len(lb.failed[0].Key)-1) + "WHY\n" + lb.failed[0].Key + "  rejected\n" + lb.failed[1].Key + "  rejected\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := lb.run(t, tt.args...)
			if r.code != exitOK || r.stdout != tt.want {
				t.Errorf("%q: exit %d, stdout %q, want %q (stderr %q)", tt.args, r.code, r.stdout, tt.want, r.stderr)
			}
		})
	}
	t.Run("FunctionError", func(t *testing.T) {
		t.Parallel()
		// Valid syntax, wrong type at run time: a user error, one line.
		oneLineError(t, lb.run(t, "list", "--state", "uncertain", "--query", "sum([].key)"), "--query: ")
	})
}

// TestOutputText: text is the table's columns, tab-separated, without the
// header (one result: field<TAB>value lines); json and table as before.
func TestOutputText(t *testing.T) {
	t.Parallel()
	lb := setupList(t)
	r := lb.run(t, "list", "--state", "uncertain", "--output", "text")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("text = %q, want 3 lines and no header", r.stdout)
	}
	for i, l := range lines {
		cells := strings.Split(l, "\t")
		// KEY STATE TENANT CHANNEL CLASS ATTEMPTS AGE REASON
		if len(cells) != 8 || cells[0] != lb.uncertain[i].Key || cells[1] != "UNCERTAIN" || cells[7] != "timeout" {
			t.Errorf("line %d = %q, want the 8 columns of row %s", i, l, lb.uncertain[i].Key)
		}
	}
	ins := lb.run(t, "inspect", lb.failed[0].Key, "--output", "text")
	if ins.code != exitOK || !strings.HasPrefix(ins.stdout, "key\t"+lb.failed[0].Key+"\nstate\tFAILED\n") || !strings.Contains(ins.stdout, "\nreason\trejected\n") {
		t.Errorf("inspect --output text = %q", ins.stdout)
	}
	tab := lb.run(t, "inspect", lb.failed[0].Key, "--output", "table")
	if tab.code != exitOK || !strings.HasPrefix(tab.stdout, "key:  ") || !strings.Contains(tab.stdout, "\nstate:  ") {
		t.Errorf("inspect --output table = %q", tab.stdout)
	}
	// Every list command honours it.
	for _, args := range [][]string{
		{"find", "--tenant", "acme", "--event", "f1"},
		{"apikey", "list", "--tenant", "acme"},
		{"template", "list", "--tenant", "acme"},
	} {
		r := lb.run(t, append(args, "--output", "text")...)
		if r.code != exitOK || strings.HasPrefix(r.stdout, "{") || strings.Contains(r.stdout, "KEY") {
			t.Errorf("%q --output text: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestPlainErrors: the failures every command meets are one plain line on
// stderr, exit status 1, without the SDK's error chain.
func TestPlainErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// No region: TestBinary (the SDK reads AWS_REGION from the process's
	// environment too, which the test does not control).
	t.Run("NoTable", func(t *testing.T) {
		t.Parallel()
		vars := maps.Clone(b.vars)
		vars["SENDONCE_TABLE"] = "nope-" + testenv.RandomID()
		want := `table "` + vars["SENDONCE_TABLE"] + `" does not exist in us-east-1 at ` + testenv.DynamoDBEndpoint(t) +
			`: create it with "sendonce create-tables --table ` + vars["SENDONCE_TABLE"] + `"`
		for _, args := range [][]string{
			{"inspect", sampleKey}, {"list", "--state", "uncertain"}, {"list", "--state", "failed"},
			{"find", "--tenant", "acme", "--event", "e"}, {"apikey", "list", "--tenant", "acme"}, {"template", "list", "--tenant", "acme"},
		} {
			r := runWith(t, vars, "", args...)
			if strings.Contains(r.stderr, "warning") {
				// list --state failed warns before it scans; the error
				// is then the last line.
				r.stderr = r.stderr[strings.Index(r.stderr, "\n")+1:]
			}
			oneLineError(t, r, want)
			if strings.Contains(r.stderr, "ResourceNotFoundException") || strings.Contains(r.stderr, "RequestID") {
				t.Errorf("%q: stderr %q carries the SDK's error", args, r.stderr)
			}
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		r := runWith(t, b.vars, "", "inspect", sampleKey, "--endpoint-url", "http://127.0.0.1:1")
		oneLineError(t, r, "inspect: cannot reach DynamoDB at http://127.0.0.1:1: connection refused")
	})
	t.Run("NoQueue", func(t *testing.T) {
		t.Parallel()
		vars := maps.Clone(b.vars)
		vars["AWS_ENDPOINT_URL_SQS"] = testenv.MotoEndpoint(t)
		url := testenv.MotoEndpoint(t) + "/123456789012/nope-" + testenv.RandomID()
		oneLineError(t, runWith(t, vars, "", "dlq", "list", "--dlq-url", url), "dlq list: queue "+url+" does not exist in us-east-1 (check --dlq-url or SENDONCE_DLQ_URL)")
	})
	t.Run("Debug", func(t *testing.T) {
		t.Parallel()
		// --debug keeps the SDK's whole error.
		vars := maps.Clone(b.vars)
		vars["SENDONCE_TABLE"] = "nope-" + testenv.RandomID()
		r := runWith(t, vars, "", "inspect", sampleKey, "--debug")
		if r.code != exitError || !strings.Contains(r.stderr, "ResourceNotFoundException") {
			t.Errorf("--debug: exit %d, stderr %q; want the SDK's error", r.code, r.stderr)
		}
	})
}

// TestScanTotalsAndProgress: a scan of the table (list --state failed,
// find by event without the event index) ends with its totals on stderr;
// on a terminal a progress line is drawn while it reads and erased
// before anything else is printed.
func TestScanTotalsAndProgress(t *testing.T) {
	t.Parallel()
	lb := setupList(t)
	r := lb.run(t, "list", "--state", "failed")
	if r.code != exitOK || len(okRows(t, r)) != 2 {
		t.Fatalf("exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "warning: listing failed rows scans the whole table") ||
		!strings.Contains(lines[1], "sendonce: scanned table "+lb.table+" for FAILED rows: read 5 items in 1 pages") ||
		!strings.Contains(lines[1], "2 matched the filter; 2 left after --tenant, --channel and --older-than, 2 printed") {
		t.Errorf("stderr = %q; want the warning, then the totals", r.stderr)
	}
	if strings.Contains(r.stderr, "\r") {
		t.Errorf("stderr = %q: progress drawn where stderr is no terminal", r.stderr)
	}

	term := runTerminal(t, lb.vars, "list", "--state", "failed", "--tenant", "acme")
	if term.code != exitOK || !strings.Contains(term.stderr, "\r\033[Ksendonce: scanning table "+lb.table+": 5 items read, 2 matched (1 pages)") {
		t.Errorf("on a terminal: exit %d, stderr %q; want the progress line", term.code, term.stderr)
	}
	if i, j := strings.LastIndex(term.stderr, "scanning table"), strings.Index(term.stderr, "sendonce: scanned table"); j < i || !strings.Contains(term.stderr[i:j], "\r\033[K") {
		t.Errorf("stderr = %q: want the progress line erased before the totals", term.stderr)
	}

	find := lb.run(t, "find", "--tenant", "acme", "--event", "f1")
	if find.code != exitOK || strings.Count(find.stderr, "\n") != 1 ||
		!strings.Contains(find.stderr, "so this lookup scanned the whole table: read 5 items in 1 pages") {
		t.Errorf("find: exit %d, stderr %q; want one note with the scan's totals", find.code, find.stderr)
	}
}

// TestProgress: the live line is drawn only on a terminal, at most every
// progressEvery, and erased by clear and by a note.
func TestProgress(t *testing.T) {
	t.Parallel()
	var off bytes.Buffer
	p := newProgress(&off, false)
	p.show("scanning")
	p.clear()
	if off.Len() != 0 {
		t.Errorf("not a terminal: wrote %q", off.String())
	}
	var on bytes.Buffer
	p = newProgress(&on, true)
	p.show("one")
	p.show("two") // within progressEvery: skipped
	p.clear()
	p.clear() // nothing shown: nothing to erase
	if got, want := on.String(), "\r\033[Ksendonce: one\r\033[K"; got != want {
		t.Errorf("terminal: wrote %q, want %q", got, want)
	}
}

// TestRedriveTotals: dlq redrive ends with its totals on stderr, and with
// --query collects its lines into one array.
func TestRedriveTotals(t *testing.T) {
	t.Parallel()
	q := newQueues(t)
	q.deadLetter(t, request("evt-t1"), "configuration: provider answered 401")
	q.deadLetter(t, `{"tenant_id":"acme"}`, "invalid request: event_id: is required")
	r := runWith(t, q.vars, "", "dlq", "redrive", "--dry-run", "--queue-url", q.queue, "--query", "[?action=='invalid'] | length(@)", "--output", "text")
	if r.code != exitOK || r.stdout != "1\n" {
		t.Errorf("--query: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if want := "sendonce: dlq redrive: 2 messages: 1 would-move, 1 invalid, 0 failed in "; !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, "ReceiveMessage, 0 SendMessageBatch") {
		t.Errorf("stderr = %q, want one line starting %q, with the calls made", r.stderr, want)
	}
	r = runTerminal(t, q.vars, "dlq", "redrive", "--queue-url", q.queue, "--each")
	if r.code != exitOK || strings.Count(r.stdout, `"moved"`) != 1 {
		t.Fatalf("redrive: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "\r\033[Ksendonce: dlq redrive: 2 messages: ") || !strings.Contains(r.stderr, "sendonce: dlq redrive: 2 messages: 1 moved, 1 invalid, 0 failed in ") {
		t.Errorf("on a terminal: stderr %q; want progress, then the totals", r.stderr)
	}
	var lines []redriveView
	for l := range strings.SplitSeq(strings.TrimSpace(r.stdout), "\n") {
		var v redriveView
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, v)
	}
	if len(lines) != 2 {
		t.Errorf("stdout = %q, want a line per message", r.stdout)
	}
}

// TestOutputYAML: --output yaml prints the JSON document as YAML, one
// mapping for one result and a sequence for a list, as the AWS CLI's yaml
// output; AWS_DEFAULT_OUTPUT chooses the format when --output does not,
// and a value the CLI does not know is a usage error naming it.
func TestOutputYAML(t *testing.T) {
	t.Parallel()
	lb := setupList(t)
	r := lb.run(t, "list", "--state", "uncertain", "--output", "yaml")
	var rows []map[string]any
	if err := yaml.Unmarshal([]byte(r.stdout), &rows); r.code != exitOK || err != nil {
		t.Fatalf("list --output yaml: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	if len(rows) != 3 || rows[0]["key"] != lb.uncertain[0].Key || rows[0]["state"] != "UNCERTAIN" {
		t.Errorf("list --output yaml = %v, want the 3 rows, oldest first", rows)
	}
	r = lb.run(t, "inspect", lb.failed[0].Key, "--output", "yaml")
	var row map[string]any
	if err := yaml.Unmarshal([]byte(r.stdout), &row); r.code != exitOK || err != nil || row["key"] != lb.failed[0].Key || row["reason"] != "rejected" {
		t.Errorf("inspect --output yaml: exit %d, %v: %q", r.code, err, r.stdout)
	}
	if r := lb.run(t, "inspect", lb.failed[0].Key, "--output", "yaml", "--query", "state"); r.stdout != "FAILED\n" {
		t.Errorf("--query state --output yaml = %q, want FAILED", r.stdout)
	}

	env := func(v string) map[string]string {
		vars := maps.Clone(lb.vars)
		vars["AWS_DEFAULT_OUTPUT"] = v
		return vars
	}
	text := lb.run(t, "inspect", lb.failed[0].Key, "--output", "text")
	if r := runWith(t, env("text"), "", "inspect", lb.failed[0].Key); r.code != exitOK || r.stdout != text.stdout {
		t.Errorf("AWS_DEFAULT_OUTPUT=text: exit %d, %q, want the text output %q", r.code, r.stdout, text.stdout)
	}
	if r := runWith(t, env("yaml"), "", "inspect", lb.failed[0].Key); !strings.HasPrefix(r.stdout, "key: "+lb.failed[0].Key+"\n") {
		t.Errorf("AWS_DEFAULT_OUTPUT=yaml: %q, want YAML", r.stdout)
	}
	if r := runWith(t, env("text"), "", "inspect", lb.failed[0].Key, "--output", "json"); !strings.HasPrefix(r.stdout, "{") {
		t.Errorf("--output json under AWS_DEFAULT_OUTPUT=text: %q, want the flag to win", r.stdout)
	}
	r = runWith(t, env("xml"), "", "inspect", lb.failed[0].Key)
	if r.code != exitUsage || !strings.Contains(r.stderr, `AWS_DEFAULT_OUTPUT "xml"`) {
		t.Errorf("AWS_DEFAULT_OUTPUT=xml: exit %d, %q: want a usage error naming the variable", r.code, r.stderr)
	}
}

// TestEndpointOnlyForItsService: --endpoint-url is the endpoint of the
// service the command calls alone, as in the AWS CLI: dlq list's SQS
// calls go to it (not to a configured AWS_ENDPOINT_URL_SQS), while the
// redaction key is read from Secrets Manager at
// AWS_ENDPOINT_URL_SECRETS_MANAGER. Before, the flag sent every service's
// calls to its URL, the Secrets Manager call included.
func TestEndpointOnlyForItsService(t *testing.T) {
	t.Parallel()
	lb := setupList(t)
	moto := testenv.MotoEndpoint(t)
	keyARN, _, err := localpipeline.NewRedactKeySecret(t.Context(), moto)
	if err != nil {
		t.Fatal(err)
	}
	q := testenv.SQSAt(moto)
	dlq, err := q.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("ep-dlq-" + testenv.RandomID())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: dlq.QueueUrl}) })
	if _, err := q.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: dlq.QueueUrl, MessageBody: aws.String(`{"not":"a request"}`)}); err != nil {
		t.Fatal(err)
	}
	// The flag's URL: moto behind a proxy that records which API each
	// call is for (its X-Amz-Target, "AmazonSQS.ReceiveMessage").
	target, _ := url.Parse(moto)
	var mu sync.Mutex
	var targets []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		targets = append(targets, r.Header.Get("X-Amz-Target"))
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	vars := maps.Clone(lb.vars)
	vars["SENDONCE_REDACT_KEY_PARAM"] = keyARN
	vars["AWS_ENDPOINT_URL_SECRETS_MANAGER"] = moto
	vars["AWS_ENDPOINT_URL_SQS"] = "http://127.0.0.1:1" // nothing listens: the flag must win
	r := runWith(t, vars, "", "dlq", "list", "--dlq-url", aws.ToString(dlq.QueueUrl), "--endpoint-url", srv.URL, "--output", "json")
	if r.code != exitOK || !strings.Contains(r.stdout, `"message_id"`) {
		t.Fatalf("dlq list --endpoint-url: exit %d, %q, %s: want the dead letter", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(targets) == 0 {
		t.Error("no call reached --endpoint-url")
	}
	for _, tg := range targets {
		if !strings.HasPrefix(tg, "AmazonSQS.") {
			t.Errorf("a call for %q reached --endpoint-url, which is SQS's alone", tg)
		}
	}
}

// TestCompletion: "sendonce completion SHELL" prints cobra's completion
// script for each shell docs/cli.md names, and the overview lists it.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "# bash completion V2 for sendonce", "zsh": "#compdef sendonce", "fish": "# fish completion for sendonce", "powershell": "# powershell completion for sendonce"} {
		if r := runWith(t, nil, "", "completion", shell); r.code != exitOK || !strings.HasPrefix(r.stdout, want) {
			t.Errorf("completion %s: exit %d, %.60q, %s: want a script starting %q", shell, r.code, r.stdout, r.stderr, want)
		}
	}
	if r := runWith(t, nil, "", "help"); !strings.Contains(r.stdout, "sendonce completion bash") {
		t.Errorf("help does not list completion:\n%s", r.stdout)
	}
}
