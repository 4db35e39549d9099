package infra

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

const (
	diagramSource = "../docs/architecture.dot"
	diagramImage  = "../docs/architecture.svg"
)

// TestDiagram: docs/architecture.dot, the source of the picture the README
// opens with, is what Template.Diagram makes of template.yaml (make
// diagram rewrites it and renders docs/architecture.svg with Graphviz);
// the committed SVG has every node of it, so a picture left behind by a
// change of the template fails here without a renderer.
func TestDiagram(t *testing.T) {
	t.Parallel()
	tpl, _ := load(t, quickPath)
	want := tpl.Diagram()
	if *update {
		if err := os.WriteFile(diagramSource, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(diagramSource)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not what template.yaml gives: run make diagram", diagramSource)
	}
	svg, err := os.ReadFile(diagramImage)
	if err != nil {
		t.Fatal(err)
	}
	nodes := regexp.MustCompile(`(?m)^  "([^"]+)" \[label=`).FindAllStringSubmatch(want, -1)
	if len(nodes) < 15 {
		t.Fatalf("only %d nodes in the diagram", len(nodes))
	}
	for _, n := range nodes {
		if !strings.Contains(string(svg), "<title>"+n[1]+"</title>") {
			t.Errorf("%s has no node %s: run make diagram", diagramImage, n[1])
		}
	}
	edges := strings.Count(want, " -> ")
	if got := strings.Count(string(svg), `class="edge"`); got != edges {
		t.Errorf("%s has %d edges, the source %d: run make diagram", diagramImage, got, edges)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(strings.SplitN(string(readme), "\n", 2)[1]), "\n")
	if !strings.Contains(first, "(docs/architecture.svg)") {
		t.Errorf("README.md does not open with the diagram: its first line after the title is %q", first)
	}
}

// TestDiagramShowsTheStack: the diagram has the queues, every function,
// the table and its index, the topics and the alarms, and draws what is
// conditional dashed.
func TestDiagramShowsTheStack(t *testing.T) {
	t.Parallel()
	tpl, _ := load(t, quickPath)
	dot := tpl.Diagram()
	for _, want := range []string{
		`"NotificationQueue" -> "SenderFunction" [label="batches"]`,
		`"NotificationQueue" -> "NotificationDLQ"`,
		`"ReconcilerFunction" -> "LedgerTable_attention" [label="Query"]`,
		`"HttpApi" -> "ApiFunction" [label="POST /v1/notifications"]`,
		`"CallbackApi" -> "WebhookFunction" [label="POST /callbacks/{provider}"]`,
		`"SesEventTopic" -> "SesEventsFunction"`,
		`"Alarms" -> "AlarmTopic" [label="ALARM and OK"]`,
		`"AlarmTopic" -> "AlarmEmailSubscription_endpoint" [label="subscription"]`,
		`30 CloudWatch alarms`,
	} {
		if !strings.Contains(dot, want) {
			t.Errorf("the diagram lacks %s", want)
		}
	}
	if !regexp.MustCompile(`"SesEventsFunction" \[label="SesEvents\\nLambda \(arm64\)\\n\[EmailProvider ses\]", [^\]]*dashed`).MatchString(dot) {
		t.Error("the SES events function is not drawn as conditional")
	}
}
