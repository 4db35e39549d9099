package notify_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sendonce/sendonce/notify"
)

const schemaPath = "../schema/notification-request.v1.json"

// compileSchema compiles the published request schema.
func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(schemaPath)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaPath, err)
	}
	return sch
}

// schemaValid reports whether body is one JSON value that the schema
// accepts.
func schemaValid(sch *jsonschema.Schema, body []byte) (bool, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	return sch.Validate(v) == nil, sch.Validate(v)
}

type corpusCase struct {
	name string
	body []byte
}

func readCorpus(t *testing.T, kind string) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", kind, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s corpus: %v", kind, err)
	}
	var out []corpusCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, corpusCase{strings.TrimSuffix(filepath.Base(f), ".json"), b})
	}
	return out
}

// TestSchemaAgreesWithParse runs every corpus case through notify.Parse and
// the JSON Schema of docs/request.md: both must accept the valid cases and
// reject the invalid ones.
func TestSchemaAgreesWithParse(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	for _, kind := range []string{"valid", "invalid"} {
		for _, c := range readCorpus(t, kind) {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				_, perr := notify.Parse(c.body)
				sok, serr := schemaValid(sch, c.body)
				if want := kind == "valid"; (perr == nil) != want || sok != want {
					t.Errorf("Parse err = %v, schema valid = %v (%v); want both valid = %v", perr, sok, serr, want)
				}
			})
		}
	}
}

// TestSchemaKnownExceptions pins the rules JSON Schema cannot state, which
// docs/request.md and the schema's description list: Parse rejects these
// bodies and the schema, which sees decoded values, accepts them. If the
// schema ever rejects one, the exception is gone and the list must shrink.
func TestSchemaKnownExceptions(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	valid := `{"tenant_id":"acme","event_id":"e","channel":"sms","template":"t","recipient":{"id":"u","phone":"+15551234567"}`
	tests := []struct {
		name, body, reason string
	}{
		{"BodyOverSQSLimit", valid + `,"data":{"pad":"` + strings.Repeat("a", notify.MaxBodySize) + `"}}`, "more than"},
		{"InvalidUTF8", valid + ",\"data\":{\"x\":\"\xff\"}}", "UTF-8"},
		{"EmailOver254Bytes", `{"tenant_id":"acme","event_id":"e","channel":"email","template":"t","recipient":{"id":"u","email":"` +
			strings.Repeat("é", 125) + `@example.com"}}`, "not an email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, perr := notify.Parse([]byte(tt.body))
			var ie *notify.InvalidError
			if !errors.As(perr, &ie) || !strings.Contains(ie.Reason, tt.reason) {
				t.Errorf("Parse err = %v, want a rejection containing %q", perr, tt.reason)
			}
			if ok, err := schemaValid(sch, []byte(tt.body)); !ok {
				t.Errorf("schema rejects it (%v): not an exception any more; drop it from the list and the docs", err)
			}
		})
	}
}
