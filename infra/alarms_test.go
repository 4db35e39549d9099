package infra

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
)

type translation struct {
	once sync.Once
	cfn  map[string]any
	err  error
}

var translated = map[string]*translation{"template.yaml": {}, "template.full.yaml": {}, "template.sar.yaml": {}}

// translate returns a fresh copy of the template (template.yaml or
// template.full.yaml) translated as sam deploy would (once per test
// binary).
func translate(t *testing.T, name string) map[string]any {
	t.Helper()
	tr := translated[name]
	tr.once.Do(func() { tr.cfn, tr.err = Translate("..", name) })
	if tr.err != nil {
		t.Fatal(tr.err)
	}
	data, err := json.Marshal(tr.cfn)
	if err != nil {
		t.Fatal(err)
	}
	var cfn map[string]any
	if err := json.Unmarshal(data, &cfn); err != nil {
		t.Fatal(err)
	}
	return cfn
}

func runbook(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// TestAlarms: in the CloudFormation the template translates to, alarms
// reach a person (CheckAlarms): a topic of the stack's own unless
// AlarmTopicArn names one, AlarmEmail subscribed to it, OK actions on
// every alarm, Errors and Throttles alarms on every function, SES's
// bounce and complaint thresholds, and a runbook section for each.
func TestAlarms(t *testing.T) {
	t.Parallel()
	for name := range translated {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfn := translate(t, name)
			for _, err := range CheckAlarms(cfn, runbook(t)) {
				t.Error(err)
			}
			n, ses := 0, 0
			for _, r := range mapOf(cfn["Resources"]) {
				if mapOf(r)["Type"] == "AWS::CloudWatch::Alarm" {
					n++
					if mapOf(r)["Condition"] == "EmailViaSes" {
						ses++
					}
				}
			}
			t.Logf("%d alarms, %d of them with email through SES only", n, ses)
		})
	}
}

// TestAlarmsCatchBreakage: CheckAlarms reports each way an alarm stops
// reaching a person.
func TestAlarmsCatchBreakage(t *testing.T) {
	t.Parallel()
	props := func(cfn map[string]any, name string) map[string]any {
		return mapOf(mapOf(mapOf(cfn["Resources"])[name])["Properties"])
	}
	for name, breakIt := range map[string]func(map[string]any) string{
		"NoOKActions": func(cfn map[string]any) string {
			delete(props(cfn, "QueueAgeAlarm"), "OKActions")
			return ""
		},
		"ActionsOnlyWithATopic": func(cfn map[string]any) string {
			props(cfn, "FencingLostAlarm")["AlarmActions"] = []any{map[string]any{"Ref": "AlarmTopicArn"}}
			return ""
		},
		"NoTopic": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "AlarmTopic")
			return ""
		},
		"NoEmail": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "AlarmEmailSubscription")
			return ""
		},
		"NoWebhookThrottles": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "WebhookThrottlesAlarm")
			return ""
		},
		"SesAlarmAlways": func(cfn map[string]any) string {
			delete(mapOf(mapOf(cfn["Resources"])["SesEventsErrorsAlarm"]), "Condition")
			return ""
		},
		"ComplaintThresholdLoose": func(cfn map[string]any) string {
			props(cfn, "SesComplaintRateAlarm")["Threshold"] = 0.01
			return ""
		},
		"NoResentAlarm": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "ResentAlarm")
			return ""
		},
		"NoDuplicateCallbacksAlarm": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "DuplicateCallbacksAlarm")
			return ""
		},
		"NoTableThrottlesAlarm": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "TableThrottlesAlarm")
			return ""
		},
		"NoTableSystemErrorsAlarm": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "TableSystemErrorsAlarm")
			return ""
		},
		"NoApi5xxRateAlarm": func(cfn map[string]any) string {
			delete(mapOf(cfn["Resources"]), "Api5xxRateAlarm")
			return ""
		},
		"ResentRunbookGone": func(cfn map[string]any) string {
			return strings.Replace(runbook(t), "\n## Resent\n", "\n## Resends\n", 1)
		},
		"RunbookSectionGone": func(cfn map[string]any) string {
			return "# Operating sendonce\n\n## FencingLost\n"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfn := translate(t, "template.yaml")
			doc := runbook(t)
			if d := breakIt(cfn); d != "" {
				doc = d
			}
			if errs := CheckAlarms(cfn, doc); len(errs) == 0 {
				t.Error("CheckAlarms reports nothing")
			}
		})
	}
}
