package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/tableschema"
)

// sampleRequest is the request of the key's test vector (docs/request.md, "The key").
const (
	sampleRequest = `{"tenant_id":"acme","event_id":"evt_01J9Z3","channel":"sms","template":"order_shipped",
		"recipient":{"id":"user-42","phone":"+15551234567"},"data":{"order_id":"A-1001"}}`
	sampleKey = "v1_a5ce46682abd7dc1fbbc58b114c4d26e0c9886586f14d590ea4ef4f1f6ee0b71"
)

// result is what one run produced.
type result struct {
	code           int
	stdout, stderr string
}

// runWith calls run with stdin and the environment vars (nothing else is
// visible to it, the AWS SDK included: loadFromVars).
func runWith(t testing.TB, vars map[string]string, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] }, loadAWS: loadFromVars(vars)}
	code := runEnv(context.Background(), e, args)
	return result{code, stdout.String(), stderr.String()}
}

// oneLineError checks the exit-status contract for a user error: status
// 1, nothing on stdout, one line on stderr that contains want.
func oneLineError(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != exitError {
		t.Errorf("exit status = %d, want %d (stderr %q)", r.code, exitError, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
	if n := strings.Count(r.stderr, "\n"); n != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr = %q: %d lines, want exactly one", r.stderr, n)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr = %q, want it to contain %q", r.stderr, want)
	}
}

// usageLine checks the exit-status contract for a usage error: status 2,
// nothing on stdout, one line on stderr that contains want and names the
// help of hint ("sendonce help inspect").
func usageLine(t *testing.T, r result, want, hint string) {
	t.Helper()
	if r.code != exitUsage {
		t.Errorf("exit status = %d, want %d (stderr %q)", r.code, exitUsage, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
	if n := strings.Count(r.stderr, "\n"); n != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr = %q: %d lines, want exactly one", r.stderr, n)
	}
	if !strings.HasPrefix(r.stderr, "sendonce: ") || !strings.Contains(r.stderr, want) {
		t.Errorf("stderr = %q, want it to start with \"sendonce: \" and contain %q", r.stderr, want)
	}
	if h := fmt.Sprintf("(see %q)\n", hint); !strings.HasSuffix(r.stderr, h) {
		t.Errorf("stderr = %q, want it to end with the hint %s", r.stderr, h)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // in stderr
		hint string // the help it names
	}{
		{"NoCommand", nil, "no command given", "sendonce help"},
		{"OnlyGlobalFlags", []string{"--region", "us-east-1"}, "no command given", "sendonce help"},
		{"UnknownCommand", []string{"frobnicate"}, `unknown command "frobnicate"`, "sendonce help"},
		{"Typo", []string{"lsit", "--state", "failed"}, `unknown command "lsit"; did you mean "list"?`, "sendonce help"},
		{"APIKeyNoSubcommand", []string{"apikey"}, "apikey needs a subcommand: create, list or revoke", "sendonce help apikey"},
		{"APIKeyUnknownSubcommand", []string{"apikey", "rotate"}, `unknown apikey subcommand "rotate"`, "sendonce help apikey"},
		{"BadFlag", []string{"create-tables", "--colour"}, "unknown flag: --colour", "sendonce help create-tables"},
		{"BadFlagBeforeCommand", []string{"--colour", "red", "inspect", sampleKey}, "unknown flag: --colour", "sendonce help inspect"},
		{"BadFlagValue", []string{"create-tables", "--table", "t", "--wait", "soon"}, `invalid argument "soon" for "--wait"`, "sendonce help create-tables"},
		{"NonPositiveWait", []string{"create-tables", "--table", "t", "--wait", "0s"}, "--wait must be positive", "sendonce help create-tables"},
		{"CreateTablesNoTable", []string{"create-tables"}, "no table: pass --table NAME or set SENDONCE_TABLE", "sendonce help create-tables"},
		{"CreateTablesExtraArgument", []string{"create-tables", "--table", "t", "extra"}, "unexpected arguments: extra", "sendonce help create-tables"},
		{"KeyArgument", []string{"key", "request.json"}, "takes no arguments", "sendonce help key"},
		{"InspectNoKey", []string{"inspect", "--table", "t"}, "inspect needs a KEY", "sendonce help inspect"},
		{"InspectTwoKeys", []string{"inspect", "--table", "t", sampleKey, sampleKey}, "inspect takes one KEY", "sendonce help inspect"},
		{"InspectNoTable", []string{"inspect", sampleKey}, "no table", "sendonce help inspect"},
		{"APIKeyCreateNoTenant", []string{"apikey", "create", "--table", "t"}, "apikey create needs --tenant TENANT", "sendonce help apikey create"},
		{"APIKeyCreateNoTable", []string{"apikey", "create", "--tenant", "acme"}, "no table", "sendonce help apikey create"},
		{"APIKeyCreateTenantNoValue", []string{"apikey", "create", "--tenant"}, "flag needs an argument: --tenant", "sendonce help apikey create"},
		{"APIKeyRevokeNoID", []string{"apikey", "revoke", "--table", "t"}, "apikey revoke needs a KEY-ID", "sendonce help apikey revoke"},
		{"APIKeyRevokeTwoIDs", []string{"apikey", "revoke", "--table", "t", "a", "b"}, "takes one KEY-ID", "sendonce help apikey revoke"},
		{"HelpUnknownCommand", []string{"help", "frobnicate"}, `unknown command "frobnicate"`, "sendonce help"},
		{"HelpTwoCommands", []string{"help", "key", "inspect"}, "help takes one command", "sendonce help"},
		{"BadOutput", []string{"inspect", sampleKey, "--output", "xml"}, `--output "xml": want json, yaml, text or table`, "sendonce help inspect"},
		{"BadOutputBeforeCommand", []string{"--output", "xml", "list", "--state", "failed"}, `--output "xml": want json, yaml, text or table`, "sendonce help list"},
		{"BadQuery", []string{"inspect", sampleKey, "--table", "t", "--query", "[?"}, `--query "[?":`, "sendonce help inspect"},
		// go-jmespath's lexer panics on this one (jmespath/go-jmespath#101).
		{"QueryThatPanicsTheParser", []string{"--query", "a\u0080", "list", "--state", "failed"}, "not a JMESPath expression", "sendonce help list"},
		{"QueryOnAValue", []string{"key", "--query", "@"}, "--query does not apply to key, which prints the key alone", "sendonce help key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			usageLine(t, runWith(t, nil, "", tt.args...), tt.want, tt.hint)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // in stdout
	}{
		{"Help", []string{"help"}, "sendonce apikey revoke"},
		{"DashH", []string{"-h"}, "Exit status: 0 on success"},
		{"DashDashHelp", []string{"--help"}, "sendonce create-tables"},
		{"HelpCommand", []string{"help", "inspect"}, "subject_length and body_length"},
		{"HelpAPIKeyCommand", []string{"help", "apikey", "create"}, "shown this once"},
		{"CommandDashH", []string{"inspect", "-h"}, "address is redacted"},
		{"APIKeyDashH", []string{"apikey", "-h"}, "sendonce apikey create"},
		{"SubcommandDashH", []string{"apikey", "revoke", "--help"}, "Revokes the API key"},
		{"CreateTablesHelp", []string{"create-tables", "-h"}, "exists with the same key"},
		{"HelpAfterGlobalFlags", []string{"--region", "eu-west-1", "list", "-h"}, "--older-than D"},
		{"FlagsListed", []string{"help", "resolve"}, "--provider-id ID"},
		{"GlobalFlagsListed", []string{"help", "dlq", "redrive"}, "--query EXPRESSION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runWith(t, nil, "", tt.args...)
			if r.code != exitOK {
				t.Errorf("exit status = %d, want 0 (stderr %q)", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, tt.want) {
				t.Errorf("stdout = %q, want it to contain %q", r.stdout, tt.want)
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
		})
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	t.Run("ContractVector", func(t *testing.T) {
		t.Parallel()
		r := runWith(t, nil, sampleRequest, "key")
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("exit status %d, stderr %q, want 0 and nothing", r.code, r.stderr)
		}
		if got, want := r.stdout, sampleKey+"\n"; got != want {
			t.Errorf("stdout = %q, want %q", got, want)
		}
	})
	t.Run("IgnoresNonKeyFields", func(t *testing.T) {
		t.Parallel()
		// class, locale, data and the address are not part of the key.
		req := strings.Replace(sampleRequest, `"+15551234567"`, `"+15557654321"`, 1)
		req = strings.Replace(req, `"data"`, `"class":"otp","locale":"pt-BR","unknown":1,"data"`, 1)
		r := runWith(t, nil, req, "key")
		if got, want := r.stdout, sampleKey+"\n"; got != want || r.code != exitOK {
			t.Errorf("stdout = %q (exit %d), want %q", got, r.code, want)
		}
	})
	invalid := []struct {
		name, body, want string
	}{
		{"Empty", "", "body is empty"},
		{"NotJSON", "tenant=acme", "not JSON"},
		{"MissingTenant", strings.Replace(sampleRequest, `"tenant_id":"acme",`, "", 1), "tenant_id: is required"},
		{"BadChannel", strings.Replace(sampleRequest, `"sms"`, `"fax"`, 1), `channel: "fax" is not one of`},
		{"MissingPhone", strings.Replace(sampleRequest, `,"phone":"+15551234567"`, "", 1), "recipient.phone: is required for sms"},
		{"WrongType", strings.Replace(sampleRequest, `"evt_01J9Z3"`, `42`, 1), "event_id: must be a JSON string"},
		{"TwoValues", sampleRequest + sampleRequest, "more than one JSON value"},
		{"TooLarge", `{"data":"` + strings.Repeat("x", 300*1024) + `"}`, "more than the 262144 allowed"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runWith(t, nil, tt.body, "key")
			oneLineError(t, r, "key: invalid request: ")
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tt.want)
			}
		})
	}
}

// FuzzKey checks that key never panics, exits 0 with exactly a key or 1
// with exactly one line on stderr.
func FuzzKey(f *testing.F) {
	f.Add(sampleRequest)
	f.Add("")
	f.Add("{}")
	f.Add(`{"tenant_id":"a","event_id":"e","channel":"email","template":"t","recipient":{"id":"r","email":"a@b.c"}}`)
	f.Add("\xff\xfe")
	f.Add(`[1,2,3]`)
	f.Fuzz(func(t *testing.T, body string) {
		r := runWith(t, nil, body, "key")
		switch r.code {
		case exitOK:
			if got := strings.TrimSuffix(r.stdout, "\n"); !sendkey.Valid(got) || r.stderr != "" {
				t.Fatalf("exit 0 with stdout %q, stderr %q, want a key alone", r.stdout, r.stderr)
			}
		case exitError:
			if r.stdout != "" || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("exit 1 with stdout %q, stderr %q, want one line on stderr only", r.stdout, r.stderr)
			}
		default:
			t.Fatalf("exit status %d, want 0 or 1", r.code)
		}
	})
}

// describe turns a CreateTableInput into the TableDescription DynamoDB
// would give for it.
func describe(in *dynamodb.CreateTableInput) *types.TableDescription {
	d := &types.TableDescription{
		TableName:            in.TableName,
		AttributeDefinitions: in.AttributeDefinitions,
		KeySchema:            in.KeySchema,
		TableStatus:          types.TableStatusActive,
	}
	for _, g := range in.GlobalSecondaryIndexes {
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{
			IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection, IndexStatus: types.IndexStatusActive,
		})
	}
	return d
}

func TestSchemaDiff(t *testing.T) {
	t.Parallel()
	s := aws.String
	tests := []struct {
		name   string
		mutate func(d *types.TableDescription)
		want   []string
	}{
		{"Same", func(*types.TableDescription) {}, nil},
		{"KeyTypeNumber", func(d *types.TableDescription) {
			d.AttributeDefinitions[0] = types.AttributeDefinition{AttributeName: s("pk"), AttributeType: types.ScalarAttributeTypeN}
		}, []string{"key schema is pk (N, HASH), want pk (S, HASH)"}},
		{"SortKey", func(d *types.TableDescription) {
			d.AttributeDefinitions = append(d.AttributeDefinitions, types.AttributeDefinition{AttributeName: s("sk"), AttributeType: types.ScalarAttributeTypeS})
			d.KeySchema = []types.KeySchemaElement{{AttributeName: s("sk"), KeyType: types.KeyTypeRange}, {AttributeName: s("pk"), KeyType: types.KeyTypeHash}}
		}, []string{"key schema is pk (S, HASH) + sk (S, RANGE), want pk (S, HASH)"}},
		{"NoIndex", func(d *types.TableDescription) { d.GlobalSecondaryIndexes = nil },
			[]string{`global secondary index "attention" is missing`, `global secondary index "event" is missing`}},
		{"IndexKeys", func(d *types.TableDescription) {
			d.GlobalSecondaryIndexes[0].KeySchema = d.GlobalSecondaryIndexes[0].KeySchema[:1]
		}, []string{`index "attention" key schema is attn_pk (S, HASH), want attn_pk (S, HASH) + attn_sk (S, RANGE)`}},
		{"IndexProjection", func(d *types.TableDescription) {
			d.GlobalSecondaryIndexes[0].Projection = &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"state", "claim_id"}}
		}, []string{`index "attention" projects INCLUDE [claim_id, state], want ALL`}},
		{"ExtraIndexes", func(d *types.TableDescription) {
			d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{IndexName: s("zeta")}, types.GlobalSecondaryIndexDescription{IndexName: s("alpha")})
			d.LocalSecondaryIndexes = []types.LocalSecondaryIndexDescription{{IndexName: s("local")}}
		}, []string{`unexpected global secondary index "alpha"`, `unexpected global secondary index "zeta"`, `unexpected local secondary index "local"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// With the optional event index, so both indexes are compared.
			want := tableschema.CreateTableInput("t", tableschema.WithEventIndex(true))
			got := describe(tableschema.CreateTableInput("t", tableschema.WithEventIndex(true)))
			tt.mutate(got)
			if diff := schemaDiff(want, got); !slices.Equal(diff, tt.want) {
				t.Errorf("schemaDiff = %q, want %q", diff, tt.want)
			}
		})
	}
}

func TestView(t *testing.T) {
	t.Parallel()
	const phone = "+15551234567"
	tests := []struct {
		name  string
		in    ledger.Record
		check func(t *testing.T, v rowView)
	}{
		{"AddressRedacted", ledger.Record{Entry: ledger.Entry{Address: phone, Subject: "Hi", Body: "Code 123456 ✓"}}, func(t *testing.T, v rowView) {
			if got, want := v.Address, redact.Address(phone); got != want {
				t.Errorf("address = %q, want %q", got, want)
			}
			if v.SubjectLength != 2 || v.BodyLength != 13 {
				t.Errorf("subject_length, body_length = %d, %d, want 2, 13", v.SubjectLength, v.BodyLength)
			}
		}},
		{"ReasonRowAddress", ledger.Record{Entry: ledger.Entry{Address: "555 0100"}, Reason: "number 555 0100 unreachable"}, func(t *testing.T, v rowView) {
			if got, want := v.Reason, "number "+redact.Address("555 0100")+" unreachable"; got != want {
				t.Errorf("reason = %q, want %q", got, want)
			}
		}},
		{"ReasonOtherAddresses", ledger.Record{Reason: "to +447700900123 and ana.b+x@mail.example.com failed; endpoint arn:aws:sns:eu-west-1:123:endpoint/APNS/app/abc disabled"}, func(t *testing.T, v rowView) {
			want := "to " + redact.Address("+447700900123") + " and " + redact.Address("ana.b+x@mail.example.com") +
				" failed; endpoint " + redact.Address("arn:aws:sns:eu-west-1:123:endpoint/APNS/app/abc") + " disabled"
			if v.Reason != want {
				t.Errorf("reason = %q, want %q", v.Reason, want)
			}
		}},
		{"RecipientIDThatIsAnEmail", ledger.Record{Entry: ledger.Entry{RecipientID: "ana@example.com"}}, func(t *testing.T, v rowView) {
			if got, want := v.RecipientID, redact.Address("ana@example.com"); got != want {
				t.Errorf("recipient_id = %q, want %q", got, want)
			}
		}},
		{"PlainRecipientID", ledger.Record{Entry: ledger.Entry{RecipientID: "user-42"}, Reason: "HTTP 422: invalid template"}, func(t *testing.T, v rowView) {
			if v.RecipientID != "user-42" || v.Reason != "HTTP 422: invalid template" {
				t.Errorf("recipient_id, reason = %q, %q, want them unchanged", v.RecipientID, v.Reason)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, view(tt.in, redact.Default()))
		})
	}
}
