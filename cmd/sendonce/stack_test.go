package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.yaml.in/yaml/v3"

	"github.com/sendonce/sendonce/internal/opstate"
	"github.com/sendonce/sendonce/internal/testenv"
)

// TestStackOutputsAreTheTemplates: every output the CLI reads is an
// output of template.yaml, under the same name.
func TestStackOutputsAreTheTemplates(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Outputs map[string]any `yaml:"Outputs"`
	}
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(stackOutputs)) {
		if _, ok := tpl.Outputs[name]; !ok {
			t.Errorf("the CLI reads output %s, which template.yaml does not have", name)
		}
	}
}

// stackTemplate is a stack as moto's CloudFormation can create it, with
// template.yaml's output names: the table is one of DynamoDB Local's
// (moto's CloudFormation would create it in moto), named by a parameter;
// the queues are moto's own.
const stackTemplate = `
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Table:
    Type: String
Resources:
  NotificationQueue:
    Type: AWS::SQS::Queue
  NotificationDLQ:
    Type: AWS::SQS::Queue
Outputs:
  TableName:
    Value: !Ref Table
  QueueUrl:
    Value: !Ref NotificationQueue
  DLQUrl:
    Value: !Ref NotificationDLQ
  ApiUrl:
    Value: https://abc.execute-api.us-east-1.amazonaws.com
`

// TestStackName: --stack-name (or SENDONCE_STACK) reads the table and the
// queues from the stack's outputs (moto's CloudFormation DescribeStacks),
// so a command needs neither SENDONCE_TABLE nor the queue URLs; a stack
// that does not exist is one plain error.
func TestStackName(t *testing.T) {
	t.Parallel()
	lb := setupList(t)
	moto := testenv.MotoEndpoint(t)
	stack := createStack(t, moto, lb.table)

	vars := maps.Clone(lb.vars)
	delete(vars, "SENDONCE_TABLE")
	vars["AWS_ENDPOINT_URL_CLOUDFORMATION"] = moto
	vars["AWS_ENDPOINT_URL_SQS"] = moto
	key := lb.failed[0].Key
	if r := runWith(t, vars, "", "inspect", key, "--stack-name", stack, "--output", "text", "--query", "state"); r.code != exitOK || r.stdout != "FAILED\n" {
		t.Errorf("inspect --stack-name: exit %d, %q, %s: want the row from the stack's table", r.code, r.stdout, r.stderr)
	}
	withEnv := maps.Clone(vars)
	withEnv["SENDONCE_STACK"] = stack
	if r := runWith(t, withEnv, "", "list", "--state", "failed", "--output", "text"); r.code != exitOK || strings.Count(r.stdout, "\n") != 2 {
		t.Errorf("SENDONCE_STACK list: exit %d, %q, %s: want the 2 FAILED rows", r.code, r.stdout, r.stderr)
	}
	// The DLQ from the stack's DLQUrl output: empty, listed without error.
	if r := runWith(t, withEnv, "", "dlq", "list", "--output", "json"); r.code != exitOK || r.stdout != "" {
		t.Errorf("SENDONCE_STACK dlq list: exit %d, %q, %s: want the stack's empty DLQ", r.code, r.stdout, r.stderr)
	}
	// A command's own flag still wins over the stack.
	if r := runWith(t, withEnv, "", "inspect", key, "--table", "nope-"+testenv.RandomID()); r.code != exitError || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("--table beside a stack: exit %d, %s: want the flag's table, which does not exist", r.code, r.stderr)
	}
	// key calls no AWS service: it does not read the stack.
	if r := runWith(t, map[string]string{"SENDONCE_STACK": "nope"}, `{"tenant_id":"a","event_id":"e","channel":"sms","template":"t","recipient":{"id":"r","phone":"+15551234567"}}`, "key"); r.code != exitOK {
		t.Errorf("key with a stack set: exit %d, %s", r.code, r.stderr)
	}
	missing := "nope-" + testenv.RandomID()
	oneLineError(t, runWith(t, vars, "", "inspect", key, "--stack-name", missing), `stack "`+missing+`" does not exist in us-east-1`)
}

// createStack creates stackTemplate on moto's CloudFormation with table
// as its table and waits until it is complete; it returns its name.
func createStack(t *testing.T, moto, table string) string {
	t.Helper()
	cf := cloudformation.NewFromConfig(testenv.Config(), func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(moto) })
	stack := "sendonce-" + testenv.RandomID()
	if _, err := cf.CreateStack(t.Context(), &cloudformation.CreateStackInput{
		StackName: aws.String(stack), TemplateBody: aws.String(stackTemplate),
		Parameters: []cftypes.Parameter{{ParameterKey: aws.String("Table"), ParameterValue: aws.String(table)}},
	}); err != nil {
		t.Fatalf("moto CreateStack: %v", err)
	}
	t.Cleanup(func() {
		_, _ = cf.DeleteStack(context.Background(), &cloudformation.DeleteStackInput{StackName: aws.String(stack)})
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := cf.DescribeStacks(t.Context(), &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
		if err == nil && len(out.Stacks) == 1 && out.Stacks[0].StackStatus == cftypes.StackStatusCreateComplete {
			return stack
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack not created: %v %v", out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStatus: status on a local stack with no reconcile run recorded
// exits 3 saying so; on a healthy one (empty queues, no alarm, a recent
// reconcile run, no provider down) it exits 0 and shows the run; on an
// unhealthy one (a dead letter, one of the stack's alarms in ALARM, a
// provider known down, another paused) it exits 3 naming the first
// three, lists the stack's alarm alone, not another stack's, and shows
// the paused provider without flagging it.
func TestStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	moto := testenv.MotoEndpoint(t)
	stack := createStack(t, moto, b.table)
	vars := maps.Clone(b.vars)
	vars["SENDONCE_STACK"] = stack
	for _, svc := range []string{"CLOUDFORMATION", "SQS", "CLOUDWATCH"} {
		vars["AWS_ENDPOINT_URL_"+svc] = moto
	}
	status := func() (statusView, result) {
		t.Helper()
		r := runWith(t, vars, "", "status", "--output", "json")
		var v statusView
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("status: exit %d, %q, %s: %v", r.code, r.stdout, r.stderr, err)
		}
		return v, r
	}

	v, r := status()
	if r.code != exitAttention || len(v.NeedsAttention) != 1 || !strings.Contains(v.NeedsAttention[0], "no reconcile run") || v.LastReconcile != nil {
		t.Errorf("no reconcile run: exit %d, %+v, %q: want 3 and the missing run alone", r.code, v, r.stderr)
	}
	ops := opstate.Store{DB: b.db, Table: b.table}
	ranAt := time.Now().Add(-time.Minute)
	if err := ops.ReconcileRun(t.Context(), ranAt, map[string]int{"found": 2}); err != nil {
		t.Fatal(err)
	}
	v, r = status()
	if r.code != exitOK || v.Stack != stack || v.Backlog != 0 || v.DLQDepth != 0 || len(v.Alarms) != 0 || len(v.NeedsAttention) != 0 || r.stderr != "" {
		t.Errorf("healthy stack: exit %d, %+v, %q: want 0 and nothing needing attention", r.code, v, r.stderr)
	}
	if v.LastReconcile == nil || !v.LastReconcile.At.Equal(ranAt.Truncate(time.Millisecond)) || strings.Join(strings.Fields(string(v.LastReconcile.Summary)), "") != `{"found":2}` {
		t.Errorf("healthy stack: last reconcile %+v, want the run at %s with its report", v.LastReconcile, ranAt)
	}
	if err := ops.ProviderState(t.Context(), "twilio", opstate.Down, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := ops.ProviderState(t.Context(), "sns", opstate.Paused, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := ops.ProviderState(t.Context(), "http", opstate.Down, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err) // over: not shown
	}

	cw := cloudwatch.NewFromConfig(testenv.Config(), func(o *cloudwatch.Options) { o.BaseEndpoint = aws.String(moto) })
	alarm := func(name string) {
		t.Helper()
		if _, err := cw.PutMetricAlarm(t.Context(), &cloudwatch.PutMetricAlarmInput{
			AlarmName: aws.String(name), Namespace: aws.String("sendonce/" + stack), MetricName: aws.String("FencingLost"),
			Statistic: cwtypes.StatisticSum, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(0),
			ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanThreshold,
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = cw.DeleteAlarms(context.Background(), &cloudwatch.DeleteAlarmsInput{AlarmNames: []string{name}})
		})
		if _, err := cw.SetAlarmState(t.Context(), &cloudwatch.SetAlarmStateInput{AlarmName: aws.String(name), StateValue: cwtypes.StateValueAlarm, StateReason: aws.String("test")}); err != nil {
			t.Fatal(err)
		}
	}
	mine := stack + "-FencingLostAlarm-1A2B3C"
	alarm(mine)
	alarm("other-" + stack + "-FencingLostAlarm-1A2B3C")
	out, err := cloudformation.NewFromConfig(testenv.Config(), func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(moto) }).
		DescribeStacks(t.Context(), &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Stacks[0].Outputs {
		if aws.ToString(o.OutputKey) == "DLQUrl" {
			if _, err := testenv.SQSAt(moto).SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: o.OutputValue, MessageBody: aws.String("{}")}); err != nil {
				t.Fatal(err)
			}
		}
	}

	v, r = status()
	if r.code != exitAttention || v.DLQDepth != 1 || !slices.Equal(v.Alarms, []string{mine}) || len(v.NeedsAttention) != 3 {
		t.Errorf("unhealthy stack: exit %d, %+v: want 3, the dead letter, the stack's alarm alone and the provider down", r.code, v)
	}
	var states []string
	for _, p := range v.Providers {
		states = append(states, p.Provider+" "+p.State)
	}
	if !slices.Equal(states, []string{"sns paused", "twilio down"}) {
		t.Errorf("unhealthy stack: providers %q, want sns paused and twilio down (http's state is over)", states)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, mine) || !strings.Contains(r.stderr, "dead-letter queue") || !strings.Contains(r.stderr, "provider twilio is down") {
		t.Errorf("unhealthy stack: stderr %q, want one line naming the alarm, the dead letter and the provider down", r.stderr)
	}
}
