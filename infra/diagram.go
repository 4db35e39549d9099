package infra

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Diagram returns the Graphviz source (dot) of the architecture of the
// stack the template deploys, read from its resources: the queues and the
// dead-letter redrive, each function and what invokes it (SQS, the
// schedule, the HTTP APIs, SNS), what it writes to (the ledger table and
// the attention index, the queues, Amazon SNS and SES), the SNS topics, the
// alarms and where they go. A resource under a Condition is drawn dashed,
// with the condition. Everything is in a fixed order, so the same template
// gives the same text.
func (t *Template) Diagram() string {
	d := &diagram{nodes: map[string]string{}, edges: map[string]bool{}}
	res := t.Resources
	names := slices.Sorted(maps.Keys(res))
	byType := func(typ string) []string {
		var out []string
		for _, n := range names {
			if res[n]["Type"] == typ {
				out = append(out, n)
			}
		}
		return out
	}
	// Outside the stack.
	d.node("Producers", "producers\n(SQS SendMessage)", "external", "")
	d.node("Clients", "API clients\n(Idempotency-Key)", "external", "")
	for _, q := range byType("AWS::SQS::Queue") {
		d.node(q, q+"\nSQS queue", "queue", t.cond(q))
		if rp := mapOf(mapOf(res[q]["Properties"])["RedrivePolicy"]); rp != nil {
			d.edge(q, getAttName(rp["deadLetterTargetArn"]), fmt.Sprintf("after %v receives", rp["maxReceiveCount"]), "dashed")
		}
	}
	if slices.Contains(names, "NotificationQueue") {
		d.edge("Producers", "NotificationQueue", "", "")
	}
	for _, api := range byType("AWS::Serverless::HttpApi") {
		d.node(api, api+"\nHTTP API", "api", t.cond(api))
	}
	if slices.Contains(names, "HttpApi") {
		d.edge("Clients", "HttpApi", "", "")
	}
	for _, tbl := range append(byType("AWS::DynamoDB::Table"), byType("AWS::DynamoDB::GlobalTable")...) {
		p := mapOf(res[tbl]["Properties"])
		d.node(tbl, tbl+"\nDynamoDB: ledger rows, callbacks,\nAPI keys, templates", "table", t.cond(tbl))
		gsis, _ := p["GlobalSecondaryIndexes"].([]any)
		for _, g := range gsis {
			name, _ := mapOf(g)["IndexName"].(string)
			if name == "" {
				continue // under a Condition of its own
			}
			id := tbl + "_" + name
			d.node(id, name+" index\n(sparse, sharded)", "index", t.cond(tbl))
			d.edge(tbl, id, "", "dotted")
		}
	}
	for _, topic := range byType("AWS::SNS::Topic") {
		d.node(topic, topic+"\nSNS topic", "topic", t.cond(topic))
	}
	for _, sub := range byType("AWS::SNS::Subscription") {
		p := mapOf(res[sub]["Properties"])
		id := sub + "_endpoint"
		d.node(id, fmt.Sprint(p["Protocol"])+"\n("+refName(p["Endpoint"])+")", "external", t.cond(sub))
		d.edge(refName(p["TopicArn"]), id, "subscription", "")
	}
	for _, cs := range byType("AWS::SES::ConfigurationSet") {
		d.node(cs, cs+"\nSES configuration set", "ses", t.cond(cs))
	}
	for _, dst := range byType("AWS::SES::ConfigurationSetEventDestination") {
		p := mapOf(res[dst]["Properties"])
		topic := refName(mapOf(mapOf(p["EventDestination"])["SnsDestination"])["TopicARN"])
		d.edge(refName(p["ConfigurationSetName"]), topic, "bounce, complaint,\ndelivery, reject", "")
	}
	for _, fn := range byType("AWS::Serverless::Function") {
		p := mapOf(res[fn]["Properties"])
		d.node(fn, strings.TrimSuffix(fn, "Function")+"\nLambda (arm64)", "function", t.cond(fn))
		events := mapOf(p["Events"])
		for _, en := range slices.Sorted(maps.Keys(events)) {
			ev := mapOf(events[en])
			ep := mapOf(ev["Properties"])
			switch ev["Type"] {
			case "SQS":
				d.edge(getAttName(ep["Queue"]), fn, "batches", "")
			case "Schedule":
				id := fn + "_schedule"
				d.node(id, "EventBridge schedule", "external", t.cond(fn))
				d.edge(id, fn, "", "")
			case "HttpApi":
				d.edge(refName(ep["ApiId"]), fn, fmt.Sprintf("%v %v", ep["Method"], ep["Path"]), "")
			case "SNS":
				d.edge(refName(ep["Topic"]), fn, "", "")
			}
		}
		env := mapOf(mapOf(p["Environment"])["Variables"])
		if env["SENDONCE_TABLE"] != nil {
			for _, tbl := range byType("AWS::DynamoDB::Table") {
				d.edge(fn, tbl, "", "bold")
			}
		}
		if q := refName(env["SENDONCE_DLQ_URL"]); q != "" {
			d.edge(fn, q, "invalid requests", "")
		}
		if q := refName(env["SENDONCE_QUEUE_URL"]); q != "" {
			d.edge(fn, q, "enqueue", "")
		}
		role := getAttName(p["Role"])
		grants := t.grants(role)
		for _, tbl := range byType("AWS::DynamoDB::Table") {
			for _, g := range grants["dynamodb:Query"] {
				if m := indexARN.FindStringSubmatch(g); m != nil {
					d.edge(fn, tbl+"_"+m[1], "Query", "")
				}
			}
		}
		if len(grants["sns:Publish"]) > 0 {
			d.node("SNS", "Amazon SNS\n(SMS, push)", "external", "")
			d.edge(fn, "SNS", "", "")
		}
		if len(grants["ses:SendEmail"]) > 0 {
			d.node("SES", "Amazon SES\n(email)", "external", t.cond("SesConfigurationSet"))
			d.edge(fn, "SES", "", "")
		}
	}
	if slices.Contains(names, "CallbackApi") {
		d.node("Providers", "providers' delivery\ncallbacks", "external", "")
		d.edge("Providers", "CallbackApi", "", "")
	}
	for _, cs := range byType("AWS::SES::ConfigurationSet") {
		if d.nodes["SES"] != "" {
			d.edge("SES", cs, "", "")
		}
	}
	alarms := byType("AWS::CloudWatch::Alarm")
	if len(alarms) > 0 {
		var lines []string
		for i := 0; i < len(alarms); i += 3 {
			lines = append(lines, strings.Join(alarms[i:min(i+3, len(alarms))], ", "))
		}
		d.node("Alarms", fmt.Sprintf("%d CloudWatch alarms\n%s", len(alarms), strings.Join(lines, "\n")), "alarms", "")
		for _, topic := range byType("AWS::SNS::Topic") {
			if strings.Contains(topic, "Alarm") {
				d.edge("Alarms", topic, "ALARM and OK", "")
			}
		}
	}
	return d.String()
}

// indexARN matches the index of a table's index ARN.
var indexARN = regexp.MustCompile(`/index/([A-Za-z0-9_-]+)`)

type diagram struct {
	nodes map[string]string // id → its line
	edges map[string]bool   // its lines
}

var shapes = map[string]string{
	"external": `shape=plaintext, fontcolor="#444444"`,
	"queue":    `shape=box, style="rounded,filled", fillcolor="#f9d6a5"`,
	"api":      `shape=box, style="rounded,filled", fillcolor="#d7c7f2"`,
	"table":    `shape=cylinder, style=filled, fillcolor="#c6dcf5"`,
	"index":    `shape=cylinder, style=filled, fillcolor="#e3eefa"`,
	"topic":    `shape=box, style="rounded,filled", fillcolor="#f5c6d6"`,
	"ses":      `shape=box, style="rounded,filled", fillcolor="#f5c6d6"`,
	"function": `shape=box, style=filled, fillcolor="#fbe7b5"`,
	"alarms":   `shape=note, style=filled, fillcolor="#eeeeee", fontsize=9`,
}

// dashedStyle makes a filled node's style dashed.
var dashedStyle = strings.NewReplacer(`style="rounded,filled"`, `style="rounded,filled,dashed"`, "style=filled", `style="filled,dashed"`)

func (d *diagram) node(id, label, kind, cond string) {
	if _, ok := d.nodes[id]; ok {
		return
	}
	attrs := shapes[kind]
	if cond != "" {
		label += "\n[" + cond + "]"
		if dashed := dashedStyle.Replace(attrs); dashed != attrs {
			attrs = dashed + `, color="#888888"`
		} else {
			attrs += `, color="#888888", style=dashed`
		}
	}
	d.nodes[id] = fmt.Sprintf("  %q [label=%q, %s];", id, label, attrs)
}

func (d *diagram) edge(from, to, label, style string) {
	if from == "" || to == "" {
		return
	}
	var attrs []string
	if label != "" {
		attrs = append(attrs, fmt.Sprintf("label=%q", label))
	}
	if style != "" {
		attrs = append(attrs, "style="+style)
	}
	line := fmt.Sprintf("  %q -> %q", from, to)
	if len(attrs) > 0 {
		line += " [" + strings.Join(attrs, ", ") + "]"
	}
	d.edges[line+";"] = true
}

func (d *diagram) String() string {
	var b strings.Builder
	b.WriteString("// The sendonce stack as template.yaml declares it. Made by infra's\n")
	b.WriteString("// Template.Diagram (make diagram); render: dot -Tsvg docs/architecture.dot.\n")
	b.WriteString("digraph sendonce {\n")
	b.WriteString("  rankdir=TB;\n  nodesep=0.3;\n  ranksep=0.5;\n")
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n")
	for _, id := range slices.Sorted(maps.Keys(d.nodes)) {
		b.WriteString(d.nodes[id] + "\n")
	}
	for _, e := range slices.Sorted(maps.Keys(d.edges)) {
		b.WriteString(e + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// cond describes the Condition a resource is created under, "" for none.
func (t *Template) cond(name string) string {
	c, _ := t.Resources[name]["Condition"].(string)
	if c == "" {
		return ""
	}
	return t.describe(map[string]any{"Condition": c}, 0)
}

// describe puts a condition in words: "P v" for P equal to v, "P empty",
// "P set", joined by "and", "or", "not".
func (t *Template) describe(v any, depth int) string {
	m := mapOf(v)
	if depth > maxDepth || len(m) != 1 {
		return fmt.Sprint(v)
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch fn {
		case "Condition":
			name, _ := arg.(string)
			return t.describe(t.Conditions[name], depth+1)
		case "Fn::Equals":
			if len(args) == 2 {
				p, _ := mapOf(args[0])["Ref"].(string)
				val, ok := scalar(args[1])
				switch {
				case p != "" && ok && val == "":
					return p + " empty"
				case p != "" && ok:
					return p + " " + val
				}
			}
		case "Fn::Not":
			if len(args) == 1 {
				if inner := t.describe(args[0], depth+1); strings.HasSuffix(inner, " empty") {
					return strings.TrimSuffix(inner, " empty") + " set"
				} else {
					return "not " + inner
				}
			}
		case "Fn::And", "Fn::Or":
			parts := make([]string, len(args))
			for i, a := range args {
				parts[i] = t.describe(a, depth+1)
			}
			return strings.Join(parts, map[string]string{"Fn::And": " and ", "Fn::Or": " or "}[fn])
		}
	}
	return fmt.Sprint(v)
}

// grants returns, for the role's Allow statements (both branches of any
// Fn::If), each action and the resources it is granted on (as text).
func (t *Template) grants(role string) map[string][]string {
	out := map[string][]string{}
	props := mapOf(t.Resources[role]["Properties"])
	pols, _ := props["Policies"].([]any)
	for _, pol := range pols {
		sts, _ := mapOf(mapOf(pol)["PolicyDocument"])["Statement"].([]any)
		for _, st := range flattenIf(sts) {
			s := mapOf(st)
			if s["Effect"] != "Allow" {
				continue
			}
			res := fmt.Sprint(s["Resource"])
			for _, a := range flattenIf([]any{s["Action"]}) {
				if as, ok := a.(string); ok {
					out[as] = append(out[as], res)
				}
			}
		}
	}
	return out
}

// flattenIf returns the items of list, with each Fn::If replaced by both
// of its branches and lists flattened.
func flattenIf(list []any) []any {
	var out []any
	for _, it := range list {
		if args, ok := mapOf(it)["Fn::If"].([]any); ok && len(args) == 3 {
			out = append(out, flattenIf(args[1:])...)
			continue
		}
		if l, ok := it.([]any); ok {
			out = append(out, flattenIf(l)...)
			continue
		}
		out = append(out, it)
	}
	return out
}

func refName(v any) string {
	s, _ := mapOf(v)["Ref"].(string)
	return s
}

func getAttName(v any) string {
	if args, ok := mapOf(v)["Fn::GetAtt"].([]any); ok && len(args) == 2 {
		s, _ := args[0].(string)
		return s
	}
	return ""
}
