package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Translate returns the CloudFormation `sam deploy` would submit for the
// SAM template at path: scripts/sam-translate.py (the SAM translator that
// ships with cfn-lint) run from the repository root root. Its error says
// how to install the translator when python3 or samtranslator is missing.
func Translate(root, path string) (map[string]any, error) {
	cmd := exec.Command("python3", "scripts/sam-translate.py", path)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("infra: translate %s: %v: %s (the SAM translator ships with cfn-lint: pip install cfn-lint)", path, err, strings.TrimSpace(stderr.String()))
	}
	var cfn map[string]any
	if err := json.Unmarshal(out, &cfn); err != nil {
		return nil, fmt.Errorf("infra: translate %s: %w", path, err)
	}
	return cfn, nil
}

// AlarmTarget is what every alarm's AlarmActions and OKActions hold: the
// topic the stack creates, or the one AlarmTopicArn names.
var AlarmTarget = []any{map[string]any{"Fn::If": []any{"CreateAlarmTopic", map[string]any{"Ref": "AlarmTopic"}, map[string]any{"Ref": "AlarmTopicArn"}}}}

// SESThresholds are the reputation rates at which SES acts on an
// account, as fractions: under review at a bounce rate of 5% and a
// complaint rate of 0.1%, sending paused at 10% and 0.5%.
var SESThresholds = map[string][]float64{
	"Reputation.BounceRate":    {0.05, 0.1},
	"Reputation.ComplaintRate": {0.001, 0.005},
}

// FailoversQuery is the Metrics Insights query of the failover alarm, the
// text of its Fn::Sub: the Failovers of every channel, from and to
// whichever provider (metrics.Failovers), in the stack's own namespace
// (metrics.StackNamespace of AWS::StackName).
const FailoversQuery = `SELECT SUM(Failovers) FROM "sendonce/${AWS::StackName}"`

// RequiredAlarms are what a stack must alarm on besides each function's
// errors and throttles, each by the words an alarm's properties (as
// JSON) must all hold: the table's DynamoDB throttles and system errors,
// the HTTP API's 5xx rate, and the sendonce metrics Resent (a resend that
// may have delivered twice) and DuplicateCallbacks.
var RequiredAlarms = map[string][]string{
	"DynamoDB throttles on the table":     {`"AWS/DynamoDB`, "SUM(ThrottledRequests)", "TableName"},
	"DynamoDB system errors on the table": {`"AWS/DynamoDB`, "SUM(SystemErrors)", "TableName"},
	"the HTTP API's 5xx rate":             {`"AWS/ApiGateway"`, `"5xx"`, `"Count"`, `"HttpApi"`, "errors / requests"},
	"Resent":                              {`SUM(Resent) FROM \"sendonce/${AWS::StackName}\"`},
	"DuplicateCallbacks":                  {`SUM(DuplicateCallbacks) FROM \"sendonce/${AWS::StackName}\"`},
}

// runbookAnchor matches the runbook link every alarm description ends in.
var runbookAnchor = regexp.MustCompile(`docs/operations\.md#([a-z0-9-]+)`)

// CheckAlarms returns what is wrong with the alarms of cfn, a translated
// template, given the runbook's text: the alarm topic the stack creates
// when AlarmTopicArn is empty and the AlarmEmail subscription to it;
// an alarm on each of RequiredAlarms;
// every alarm notifying AlarmTarget both when it fires and when it
// recovers, and linking a runbook section that exists; an Errors and a
// Throttles alarm on every Lambda function, under the function's own
// Condition; and, with email through SES, an alarm at each of SES's
// reputation thresholds (SESThresholds); where a channel's parameter
// allows a route of more than one provider, one alarm on FailoversQuery,
// under Condition FailsOver when the template has it. Nothing wrong: nil.
func CheckAlarms(cfn map[string]any, runbook string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	res := mapOf(cfn["Resources"])
	conds := mapOf(cfn["Conditions"])

	if want := map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "AlarmTopicArn"}, ""}}; !reflect.DeepEqual(conds["CreateAlarmTopic"], want) {
		bad("Condition CreateAlarmTopic is %v, want %v", conds["CreateAlarmTopic"], want)
	}
	if t := res["AlarmTopic"]; mapOf(t)["Type"] != "AWS::SNS::Topic" || mapOf(t)["Condition"] != "CreateAlarmTopic" {
		bad("no AWS::SNS::Topic AlarmTopic under Condition CreateAlarmTopic")
	}
	sub := mapOf(res["AlarmEmailSubscription"])
	sp := mapOf(sub["Properties"])
	if sub["Type"] != "AWS::SNS::Subscription" || sp["Protocol"] != "email" ||
		!reflect.DeepEqual(sp["Endpoint"], map[string]any{"Ref": "AlarmEmail"}) ||
		!reflect.DeepEqual(sp["TopicArn"], map[string]any{"Ref": "AlarmTopic"}) {
		bad("AlarmEmailSubscription does not subscribe AlarmEmail (email) to AlarmTopic")
	}
	if c := fmt.Sprint(conds[fmt.Sprint(sub["Condition"])]); !strings.Contains(c, "CreateAlarmTopic") || !strings.Contains(c, "AlarmEmail") {
		bad("AlarmEmailSubscription's Condition %v is not: the stack creates the topic and AlarmEmail is set", sub["Condition"])
	}

	anchors := map[string]bool{}
	for line := range strings.Lines(runbook) {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchors[slug(h)] = true
		}
	}
	routes := false // a channel's parameter takes a route of more than one provider
	for _, c := range RouteChannels {
		param := mapOf(mapOf(cfn["Parameters"])[c.Param])
		routes = routes || strings.Contains(fmt.Sprint(param["AllowedValues"], param["AllowedPattern"]), ",")
	}
	failovers := 0
	type fnAlarm struct{ fn, metric string }
	perFunction := map[fnAlarm][]string{}
	ses := map[string][]float64{}
	alarms := 0
	required := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(res)) {
		r := mapOf(res[name])
		if r["Type"] != "AWS::CloudWatch::Alarm" {
			continue
		}
		alarms++
		p := mapOf(r["Properties"])
		js, _ := json.Marshal(p)
		for what, words := range RequiredAlarms {
			all := true
			for _, w := range words {
				all = all && strings.Contains(string(js), w)
			}
			required[what] = required[what] || all
		}
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if !reflect.DeepEqual(p[k], AlarmTarget) {
				bad("%s: %s is %v, want %v", name, k, p[k], AlarmTarget)
			}
		}
		desc, _ := p["AlarmDescription"].(string)
		if m := runbookAnchor.FindStringSubmatch(desc); m == nil || !anchors[m[1]] {
			bad("%s: its description %q links no section of docs/operations.md", name, desc)
		}
		if ms, _ := p["Metrics"].([]any); len(ms) == 1 && reflect.DeepEqual(mapOf(ms[0])["Expression"], map[string]any{"Fn::Sub": FailoversQuery}) {
			failovers++
			want := any(nil)
			if _, ok := conds[FailsOverCond]; ok {
				want = FailsOverCond
			}
			if r["Condition"] != want {
				bad("%s: Condition %v, want %v (a channel's route lists more than one provider)", name, r["Condition"], want)
			}
		}
		switch p["Namespace"] {
		case "AWS/Lambda":
			dims, _ := p["Dimensions"].([]any)
			if len(dims) != 1 || mapOf(dims[0])["Name"] != "FunctionName" {
				bad("%s: Lambda alarm without the one FunctionName dimension", name)
				continue
			}
			fn, _ := mapOf(mapOf(dims[0])["Value"])["Ref"].(string)
			if mapOf(res[fn])["Type"] != "AWS::Lambda::Function" {
				bad("%s: FunctionName %v is not a function of the template", name, mapOf(dims[0])["Value"])
				continue
			}
			if r["Condition"] != mapOf(res[fn])["Condition"] {
				bad("%s: Condition %v, its function %s's is %v", name, r["Condition"], fn, mapOf(res[fn])["Condition"])
			}
			k := fnAlarm{fn, fmt.Sprint(p["MetricName"])}
			perFunction[k] = append(perFunction[k], name)
		case "AWS/SES":
			if r["Condition"] != "EmailViaSes" {
				bad("%s: an SES alarm outside Condition EmailViaSes", name)
			}
			m := fmt.Sprint(p["MetricName"])
			th, _ := p["Threshold"].(float64)
			if p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
				bad("%s: ComparisonOperator %v, want GreaterThanOrEqualToThreshold (SES acts at the rate)", name, p["ComparisonOperator"])
			}
			ses[m] = append(ses[m], th)
		}
	}
	if alarms == 0 {
		bad("no alarms")
	}
	for _, what := range slices.Sorted(maps.Keys(RequiredAlarms)) {
		if !required[what] {
			bad("no alarm on %s", what)
		}
	}
	if routes && failovers != 1 {
		bad("%d alarms on %q, want 1: a channel's route may list more than one provider", failovers, FailoversQuery)
	}
	for _, name := range slices.Sorted(maps.Keys(res)) {
		if mapOf(res[name])["Type"] != "AWS::Lambda::Function" {
			continue
		}
		for _, metric := range []string{"Errors", "Throttles"} {
			if len(perFunction[fnAlarm{name, metric}]) == 0 {
				bad("function %s has no %s alarm", name, metric)
			}
		}
	}
	for metric, want := range SESThresholds {
		got := ses[metric]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			bad("SES %s alarms at %v, want one at each of SES's thresholds %v", metric, got, want)
		}
	}
	return errs
}

// slug returns GitHub's anchor of a markdown heading.
func slug(heading string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		case r == ' ':
			return '-'
		}
		return -1 // dropped
	}, strings.ToLower(strings.TrimSpace(heading)))
}
