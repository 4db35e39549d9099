package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/benchreport"
	"github.com/sendonce/sendonce/internal/dispatch"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/rie"
	"github.com/sendonce/sendonce/internal/testenv"
	"github.com/sendonce/sendonce/provider"
)

// functions are the bootstraps measured, in order.
var functions = []string{"sender", "reconciler", "webhook", "api"}

// lambdaCase is how one function is configured and invoked.
type lambdaCase struct {
	env     map[string]string
	payload func(i int) ([]byte, error)
	// check inspects a successful response.
	check func(out []byte) error
}

// measureLambdas builds every function's bootstrap and measures binary
// sizes, cold and warm invokes under the Lambda Runtime Interface
// Emulator, and the bootstrap's peak RSS.
func measureLambdas(ctx context.Context, env endpoints, warm int, rep *benchreport.Report) error {
	root, err := rie.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sendonce-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// A table and queues as the local pipeline makes them.
	res, err := localpipeline.CreateResources(ctx, dynamoClient(env.dynamo), testenv.SQSAt(env.moto),
		localpipeline.DefaultVisibilityTimeout, localpipeline.DefaultMaxReceiveCount)
	if err != nil {
		return err
	}
	prov, simURL, stopSim, err := startSim(0)
	if err != nil {
		return err
	}
	defer stopSim()
	cases, err := lambdaCases(ctx, env, res, prov, simURL)
	if err != nil {
		return err
	}

	for _, name := range functions {
		var host string
		for _, arch := range slices.Compact([]string{runtime.GOARCH, "arm64"}) {
			bin := filepath.Join(dir, name+"-"+arch)
			if err := rie.BuildBootstrap(ctx, root, name, bin, "GOARCH="+arch); err != nil {
				rep.Note("%s: %v: not measured.", name, err)
				continue
			}
			st, err := os.Stat(bin)
			if err != nil {
				return err
			}
			rep.Add("lambda", fmt.Sprintf("%s: binary size linux/%s", name, arch), float64(st.Size())/(1<<20), "MiB",
				"go build -tags lambda.norpc -trimpath -ldflags='-s -w', CGO_ENABLED=0")
			if arch == runtime.GOARCH {
				host = bin
			}
		}
		if host == "" {
			continue
		}
		if err := measureInvokes(ctx, name, host, cases[name], warm, rep); err != nil {
			rep.Note("%s under the RIE: %v", name, err)
		}
	}
	return nil
}

// coldStarts is how many fresh emulator instances each function is
// cold-started in; the median is reported, since one sample on a shared
// 2-core machine is mostly noise.
const coldStarts = 3

// measureInvokes runs bootstrap under the emulator coldStarts times: one
// cold invoke each, then, in the last instance, warm ones, and reads the
// bootstrap's peak RSS there.
func measureInvokes(ctx context.Context, name, bootstrap string, c lambdaCase, warm int, rep *benchreport.Report) error {
	var colds, inits []float64
	var inst *rie.Instance
	for launch := range coldStarts {
		if inst != nil {
			_ = inst.Close()
		}
		var err error
		inst, err = rie.Launch(ctx, rie.Config{Bootstrap: bootstrap, FunctionName: "sendonce-bench-" + name, Env: c.env})
		if err != nil {
			return err
		}
		d, err := invokeOnce(ctx, inst, c, launch*1000)
		if err != nil {
			_ = inst.Close()
			return err
		}
		colds = append(colds, float64(d)/float64(time.Millisecond))
		if v, ok := parseInitDuration(inst.EmulatorLogs()); ok {
			inits = append(inits, v)
		}
	}
	defer inst.Close()
	var warms []float64
	for i := 1; i <= warm; i++ {
		d, err := invokeOnce(ctx, inst, c, (coldStarts-1)*1000+i)
		if err != nil {
			return err
		}
		warms = append(warms, float64(d)/float64(time.Millisecond))
	}
	rep.Add("lambda", name+": cold invoke (median)", benchreport.Median(colds), "ms",
		fmt.Sprintf("first invoke of %d fresh aws-lambda-rie instances, client-side wall time: process start, init (config, SDK clients), handler", coldStarts))
	if len(inits) > 0 {
		rep.Add("lambda", name+": init duration (median)", benchreport.Median(inits), "ms", "the emulator's \"INIT REPORT(durationMs: ...)\": from the runtime's start to its first /next (main's set-up: config, SDK clients, secrets); its REPORT line's \"Init Duration\" is not this (it shows ~0.02 ms)")
	} else {
		rep.Note("%s: the emulator logged no INIT REPORT line: init duration not measured.", name)
	}
	rep.Add("lambda", name+": warm invoke (median)", benchreport.Median(warms), "ms",
		fmt.Sprintf("median of %d warm invokes, client-side wall time, each doing the function's real work against DynamoDB Local / moto / the simulator", warm))
	pids := inst.FunctionPIDs()
	if len(pids) == 0 {
		return fmt.Errorf("no bootstrap process found under the emulator (pid %d)", inst.PID())
	}
	hwm, err := vmHWM(pids[0])
	if err != nil {
		return err
	}
	rep.Add("lambda", name+": peak RSS", float64(hwm)/1024, "MiB",
		fmt.Sprintf("VmHWM of the bootstrap process from /proc/<pid>/status after %d invokes", warm+1))
	return nil
}

// invokeOnce invokes inst with c's i-th payload and checks the answer.
func invokeOnce(ctx context.Context, inst *rie.Instance, c lambdaCase, i int) (time.Duration, error) {
	payload, err := c.payload(i)
	if err != nil {
		return 0, err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	out, err := inst.Invoke(ictx, payload)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("invoke %d: %v; function output: %s", i, err, truncate(inst.Logs(), 400))
	}
	if err := c.check(out); err != nil {
		return 0, fmt.Errorf("invoke %d: %v", i, err)
	}
	return d, nil
}

// parseInitDuration returns the init phase's duration in ms from the
// emulator's own record of it. (The "Init Duration" of its REPORT line is
// not the init time: it shows ~0.02 ms whatever the function does.)
func parseInitDuration(emulatorLog string) (float64, bool) {
	_, rest, ok := strings.Cut(emulatorLog, "INIT REPORT(durationMs: ")
	var ms float64
	_, err := fmt.Sscanf(rest, "%g)", &ms)
	return ms, ok && err == nil
}

// vmHWM returns the peak resident set size of pid in KiB.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(b)
}

// parseVmHWM reads the VmHWM line ("VmHWM:	   12345 kB") of a
// /proc/<pid>/status text (never its first line), in KiB.
func parseVmHWM(status []byte) (int64, error) {
	_, line, ok := strings.Cut(string(status), "\nVmHWM:")
	var kb int64
	if _, err := fmt.Sscanf(line, "%d kB\n", &kb); !ok || err != nil {
		return 0, fmt.Errorf("no VmHWM line of kB in the process status: %v", err)
	}
	return kb, nil
}

// statusIs checks a function's HTTP answer (a Function URL or API
// Gateway response) for status want.
func statusIs(function string, want int) func([]byte) error {
	return func(out []byte) error {
		var resp struct {
			StatusCode int `json:"statusCode"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != want {
			return fmt.Errorf("%s answered %s, want %d", function, truncate(string(out), 200), want)
		}
		return nil
	}
}

// lambdaCases configures each function against the emulators and gives it
// a payload that does the function's real work on every invoke.
func lambdaCases(ctx context.Context, env endpoints, res localpipeline.Resources, prov provider.Adapter, simURL string) (map[string]lambdaCase, error) {
	db := dynamoClient(env.dynamo)
	_, apiKey, err := apikey.New(dynamoapikey.New(db, res.Table), apikey.Config{}).Create(ctx, "bench")
	if err != nil {
		return nil, fmt.Errorf("create an API key: %w", err)
	}
	l, err := dynamoledger.New(db, res.Table, dynamoledger.Config{})
	if err != nil {
		return nil, err
	}
	s, err := newSender(l, prov)
	if err != nil {
		return nil, err
	}
	run := testenv.RandomID()
	// with is the environment pointing at the emulators, the table and
	// the queues, and extra's.
	with := func(extra map[string]string) map[string]string {
		out := res.Env(env.dynamo, env.moto)
		maps.Copy(out, extra)
		return out
	}
	providerEnv := map[string]string{
		"SENDONCE_SMS_PROVIDER":        "http",
		"SENDONCE_HTTP_PROVIDER_URL":   simURL,
		"SENDONCE_HTTP_PROVIDER_TOKEN": simToken,
	}
	secret := "bench-callback-secret"

	// Rows for the webhook's callbacks: SENT, one per invoke.
	const rows = 64
	cbKeys := make([]string, rows)
	for i := range cbKeys {
		req := request("cb-"+run, i)
		if res := s.Process(ctx, req); res.Disposition != dispatch.Sent {
			return nil, fmt.Errorf("send the callback rows: status %s (%s), want sent", res.Disposition, res.Reason)
		}
		cbKeys[i] = req.Key()
	}

	apiEvent, err := os.ReadFile(filepath.Join("events", "api-post.json"))
	if err != nil {
		return nil, fmt.Errorf("read the api's sample event: %w", err)
	}

	return map[string]lambdaCase{
		"sender": {
			env: with(providerEnv),
			payload: func(i int) ([]byte, error) {
				body, err := requestJSON(request("rie-"+run, i))
				if err != nil {
					return nil, err
				}
				return json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{
					MessageId: fmt.Sprintf("m-%d", i), Body: body, EventSource: "aws:sqs",
					EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:sendonce-notifications",
					Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
				}}})
			},
			check: func(out []byte) error {
				var resp events.SQSEventResponse
				if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
					return fmt.Errorf("sender answered %s, want no batch item failures", truncate(string(out), 200))
				}
				return nil
			},
		},
		"reconciler": {
			env: with(providerEnv),
			payload: func(int) ([]byte, error) {
				return []byte(`{"version":"0","id":"bench","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","time":"2026-11-29T12:00:00Z","region":"us-east-1","resources":[],"detail":{}}`), nil
			},
			check: func(out []byte) error {
				if !bytes.Contains(out, []byte(`"examined"`)) {
					return fmt.Errorf("reconciler answered %s, want a run summary", truncate(string(out), 200))
				}
				return nil
			},
		},
		"webhook": {
			env: with(map[string]string{"SENDONCE_HTTP_PROVIDER_CALLBACK_SECRET": secret}),
			payload: func(i int) ([]byte, error) {
				// Each invoke applies a new status event to a SENT row; rows
				// are reused, so later events of a row rank as duplicates or
				// out of order, still the full path (2 reads, 1-2 writes).
				return json.Marshal(callbackRequest([]byte(secret), fmt.Sprintf("evt-rie-%s-%d", run, i), cbKeys[i%rows], "delivered"))
			},
			check: statusIs("webhook", 200),
		},
		"api": {
			env: with(map[string]string{
				"SENDONCE_API_TENANT_RATE":    "100000/1m",
				"SENDONCE_API_RECIPIENT_RATE": "100000/1m",
			}),
			payload: func(i int) ([]byte, error) {
				var ev events.APIGatewayV2HTTPRequest
				if err := json.Unmarshal(apiEvent, &ev); err != nil {
					return nil, fmt.Errorf("events/api-post.json: %w", err)
				}
				ev.Headers["authorization"] = "Bearer " + apiKey
				ev.Headers["idempotency-key"] = fmt.Sprintf("bench-%s-%d", run, i)
				return json.Marshal(ev)
			},
			check: statusIs("api", 202),
		},
	}, nil
}
