package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/apikey"
	"github.com/sendonce/sendonce/internal/apikey/dynamoapikey"
	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/ledger/dynamoledger"
	"github.com/sendonce/sendonce/internal/redact"
	"github.com/sendonce/sendonce/internal/sendkey"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// bundle is what the DynamoDB Local tests share.
type bundle struct {
	db    *dynamodb.Client
	table string
	// vars is the environment run sees: DynamoDB Local through the SDK's
	// standard variables, with testenv's region and dummy credentials
	// (DynamoDB Local keeps one database per access key and region).
	vars map[string]string
}

// setup returns a bundle around a fresh table with the production schema.
func setup(t *testing.T, opts ...tableschema.Option) bundle {
	t.Helper()
	db := testenv.DynamoDB(t)
	table := testenv.NewTable(t, db, opts...)
	return bundle{db: db, table: table, vars: localVars(t, table)}
}

func localVars(t testing.TB, table string) map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t),
		"AWS_REGION":                testenv.Region,
		"AWS_ACCESS_KEY_ID":         "test",
		"AWS_SECRET_ACCESS_KEY":     "test",
		"SENDONCE_TABLE":            table,
	}
}

func (b bundle) run(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, b.vars, "", args...)
}

// ledger returns the DynamoDB ledger on b's table.
func (b bundle) ledger(t *testing.T) *dynamoledger.Ledger {
	t.Helper()
	led, err := dynamoledger.New(b.db, b.table, dynamoledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return led
}

// dropLater deletes table when the test ends.
func dropLater(t *testing.T, db *dynamodb.Client, table string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
}

func TestCreateTables(t *testing.T) {
	t.Parallel()
	db := testenv.DynamoDB(t)
	table := "sendonce-cli-" + testenv.RandomID()
	dropLater(t, db, table)
	vars := localVars(t, "")

	r := runWith(t, vars, "", "create-tables", "--table", table)
	if r.code != exitOK || r.stdout != "" {
		t.Fatalf("first run: exit %d, stdout %q, stderr %q; want 0 and nothing on stdout", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "created table "+table) {
		t.Errorf("first run: stderr = %q, want it to say the table was created", r.stderr)
	}

	ctx := context.Background()
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	if d.TableStatus != types.TableStatusActive {
		t.Errorf("table status = %s, want ACTIVE", d.TableStatus)
	}
	types_ := map[string]types.ScalarAttributeType{}
	for _, a := range d.AttributeDefinitions {
		types_[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	for _, a := range []string{tableschema.PartitionKey, tableschema.AttentionPK, tableschema.AttentionSK} {
		if types_[a] != types.ScalarAttributeTypeS {
			t.Errorf("attribute %s has type %q, want S", a, types_[a])
		}
	}
	if len(d.KeySchema) != 1 || aws.ToString(d.KeySchema[0].AttributeName) != tableschema.PartitionKey || d.KeySchema[0].KeyType != types.KeyTypeHash {
		t.Errorf("key schema = %+v, want pk HASH alone", d.KeySchema)
	}
	if len(d.GlobalSecondaryIndexes) != 1 {
		t.Fatalf("%d global secondary indexes, want 1 (the event index only with --event-index)", len(d.GlobalSecondaryIndexes))
	}
	if _, ok := types_[tableschema.EventPK]; ok {
		t.Errorf("attribute %s is defined without the event index", tableschema.EventPK)
	}
	g := d.GlobalSecondaryIndexes[0]
	if aws.ToString(g.IndexName) != tableschema.AttentionIndex {
		t.Errorf("index name = %q, want %q", aws.ToString(g.IndexName), tableschema.AttentionIndex)
	}
	wantKeys := map[string]types.KeyType{tableschema.AttentionPK: types.KeyTypeHash, tableschema.AttentionSK: types.KeyTypeRange}
	if len(g.KeySchema) != len(wantKeys) {
		t.Errorf("index key schema = %+v, want attn_pk HASH + attn_sk RANGE", g.KeySchema)
	}
	for _, k := range g.KeySchema {
		if wantKeys[aws.ToString(k.AttributeName)] != k.KeyType {
			t.Errorf("index key %s is %s, want %s", aws.ToString(k.AttributeName), k.KeyType, wantKeys[aws.ToString(k.AttributeName)])
		}
	}
	if g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeAll {
		t.Errorf("index projection = %+v, want ALL", g.Projection)
	}
	if len(d.LocalSecondaryIndexes) != 0 {
		t.Errorf("local secondary indexes = %+v, want none", d.LocalSecondaryIndexes)
	}
	checkTTL(t, db, table)

	// Again, naming the table through SENDONCE_TABLE: idempotent.
	vars["SENDONCE_TABLE"] = table
	r = runWith(t, vars, "", "create-tables")
	if r.code != exitOK || r.stdout != "" {
		t.Fatalf("second run: exit %d, stdout %q, stderr %q; want 0", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "already exists with the sendonce schema; nothing to do") {
		t.Errorf("second run: stderr = %q, want it to say the table already exists", r.stderr)
	}
	checkTTL(t, db, table)
}

func checkTTL(t *testing.T, db *dynamodb.Client, table string) {
	t.Helper()
	out, err := db.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.TimeToLiveDescription
	if d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != tableschema.TTLAttribute {
		t.Errorf("TTL = %+v, want ENABLED on %s", d, tableschema.TTLAttribute)
	}
}

func TestCreateTablesExisting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		// prepare creates the table as it is found.
		prepare  func(t *testing.T, db *dynamodb.Client, table string)
		wantCode int
		want     string
		// flags are create-tables' flags (none by default).
		flags []string
	}{
		{"SameSchemaTTLOff", func(t *testing.T, db *dynamodb.Client, table string) {
			mustCreate(t, db, tableschema.CreateTableInput(table))
		}, exitOK, "already exists with the sendonce schema; enabled TTL on expires_at", nil},
		{"NumberKey", func(t *testing.T, db *dynamodb.Client, table string) {
			in := tableschema.CreateTableInput(table)
			in.AttributeDefinitions[0].AttributeType = types.ScalarAttributeTypeN
			mustCreate(t, db, in)
		}, exitError, "exists with a different schema, left unchanged: key schema is pk (N, HASH), want pk (S, HASH)", nil},
		{"EventIndexAdded", func(t *testing.T, db *dynamodb.Client, table string) {
			mustCreate(t, db, tableschema.CreateTableInput(table)) // the default: no event index
		}, exitOK, "added the global secondary index(es) event it lacked", []string{"--event-index"}},
		{"EventIndexKept", func(t *testing.T, db *dynamodb.Client, table string) {
			mustCreate(t, db, tableschema.CreateTableInput(table, tableschema.WithEventIndex(true)))
		}, exitOK, "already exists with the sendonce schema", nil},
		{"NoIndexAndOtherDiff", func(t *testing.T, db *dynamodb.Client, table string) {
			in := tableschema.CreateTableInput(table)
			in.GlobalSecondaryIndexes = nil
			in.AttributeDefinitions = []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeN}}
			mustCreate(t, db, in)
		}, exitError, `global secondary index "attention" is missing`, nil},
		{"TTLOnOtherAttribute", func(t *testing.T, db *dynamodb.Client, table string) {
			mustCreate(t, db, tableschema.CreateTableInput(table))
			if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
				TableName:               aws.String(table),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)},
			}); err != nil {
				t.Fatal(err)
			}
		}, exitError, `TTL is on attribute "ttl", want "expires_at"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := testenv.DynamoDB(t)
			table := "sendonce-cli-" + testenv.RandomID()
			dropLater(t, db, table)
			tt.prepare(t, db, table)
			r := runWith(t, localVars(t, table), "", append([]string{"create-tables"}, tt.flags...)...)
			if tt.wantCode == exitError {
				oneLineError(t, r, tt.want)
				return
			}
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tt.wantCode, tt.want)
			}
			checkTTL(t, db, table)
		})
	}
}

func mustCreate(t *testing.T, db *dynamodb.Client, in *dynamodb.CreateTableInput) {
	t.Helper()
	if _, err := db.CreateTable(context.Background(), in); err != nil {
		t.Fatalf("create table: %v", err)
	}
}

func TestCreateTablesUnreachable(t *testing.T) {
	t.Parallel()
	vars := localVars(t, "t")
	vars["AWS_ENDPOINT_URL_DYNAMODB"] = "http://127.0.0.1:1" // nothing listens on port 1
	r := runWith(t, vars, "", "create-tables")
	oneLineError(t, r, "create-tables: cannot reach DynamoDB at http://127.0.0.1:1: connection refused")
}

func TestInspect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	led := b.ledger(t)
	const phone = "+15551234567"
	entry := func(key string) ledger.Entry {
		return ledger.Entry{
			Key: key, Tenant: "acme", Channel: "sms", Class: "otp", Provider: "http", Template: "login_code",
			RecipientID: "user-42", Address: phone, Body: "Your code is 834201",
		}
	}
	tests := []struct {
		name string
		// make writes the row and returns its key.
		make  func(t *testing.T, key string)
		check func(t *testing.T, v map[string]any)
	}{
		{"Pending", func(t *testing.T, key string) {
			if _, err := led.Claim(ctx, entry(key), time.Minute); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, v map[string]any) {
			want := map[string]any{
				"state": "PENDING", "address": redact.Address(phone), "body_length": float64(19),
				"attempts": float64(1), "class": "otp", "template": "login_code", "recipient_id": "user-42",
			}
			for k, w := range want {
				if v[k] != w {
					t.Errorf("%s = %v, want %v", k, v[k], w)
				}
			}
			for _, k := range []string{"claim_id", "lease_until", "created_at", "expires_at"} {
				if v[k] == nil {
					t.Errorf("%s is missing", k)
				}
			}
		}},
		{"Sent", func(t *testing.T, key string) {
			c, err := led.Claim(ctx, entry(key), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := led.Mark(ctx, c, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "msg_7"}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, v map[string]any) {
			if v["state"] != "SENT" || v["provider_message_id"] != "msg_7" {
				t.Errorf("state, provider_message_id = %v, %v, want SENT, msg_7", v["state"], v["provider_message_id"])
			}
			for _, k := range []string{"address", "body_length"} {
				if _, ok := v[k]; ok {
					t.Errorf("%s = %v, want it absent from a final row", k, v[k])
				}
			}
		}},
		// A failover: the first attempt through http was refused, the
		// second went through sns. inspect shows each attempt's provider
		// and outcome.
		{"AttemptHistory", func(t *testing.T, key string) {
			c, err := led.Claim(ctx, entry(key), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := led.Release(ctx, c, "transient: 503: provider unavailable", time.Time{}); err != nil {
				t.Fatal(err)
			}
			cur, err := led.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := led.TakeOver(ctx, cur, "sns", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := led.Mark(ctx, c2, ledger.Outcome{State: ledger.StateSent, ProviderMessageID: "sns-1"}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, v map[string]any) {
			h, _ := v["history"].([]any)
			if v["provider"] != "sns" || len(h) != 1 || h[0] != "1 http released: transient: 503: provider unavailable" {
				t.Errorf("provider %v, history %v; want sns after [1 http released: transient: 503: provider unavailable]", v["provider"], v["history"])
			}
		}},
		{"FailedReasonWithAddress", func(t *testing.T, key string) {
			c, err := led.Claim(ctx, entry(key), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := led.Mark(ctx, c, ledger.Outcome{State: ledger.StateFailed, Reason: "HTTP 422: 'To' number " + phone + " is not a mobile number"}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, v map[string]any) {
			if want := "HTTP 422: 'To' number " + redact.Address(phone) + " is not a mobile number"; v["reason"] != want {
				t.Errorf("reason = %v, want %q", v["reason"], want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := sendkey.Derive(sendkey.Parts{Tenant: "acme", EventID: tt.name, RecipientID: "user-42", Channel: "sms", Template: "login_code"})
			tt.make(t, key)
			r := b.run(t, "inspect", key)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, phone) || strings.Contains(r.stdout, "834201") {
				t.Errorf("stdout holds the raw phone number or the message:\n%s", r.stdout)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
			}
			if v["key"] != key {
				t.Errorf("key = %v, want %s", v["key"], key)
			}
			tt.check(t, v)
		})
	}

	t.Run("UnknownKey", func(t *testing.T) {
		t.Parallel()
		oneLineError(t, b.run(t, "inspect", sampleKey), "no ledger row for "+sampleKey)
	})
	t.Run("NotAKey", func(t *testing.T) {
		t.Parallel()
		oneLineError(t, b.run(t, "inspect", "order-1001"), `"order-1001" is not an idempotency key`)
	})
	t.Run("FlagAfterKey", func(t *testing.T) {
		t.Parallel()
		vars := localVars(t, "")
		r := runWith(t, vars, "", "inspect", sampleKey, "--table", b.table)
		oneLineError(t, r, "in table "+b.table)
	})
}

func TestAPIKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store := apikey.New(dynamoapikey.New(b.db, b.table), apikey.Config{CacheTTL: -1})

	r := b.run(t, "apikey", "create", "--tenant", "acme")
	if r.code != exitOK {
		t.Fatalf("create: exit %d, stderr %q, want 0", r.code, r.stderr)
	}
	key := strings.TrimSuffix(r.stdout, "\n")
	if strings.Contains(key, "\n") || !strings.HasPrefix(key, apikey.Prefix) {
		t.Fatalf("create: stdout = %q, want the key alone", r.stdout)
	}
	id := apikey.ID(key)
	if id == "" || !strings.Contains(r.stderr, id) {
		t.Errorf("create: stderr = %q, want the key id %q", r.stderr, id)
	}
	if strings.Contains(r.stderr, key) {
		t.Errorf("create: stderr holds the key itself: %q", r.stderr)
	}
	tenant, err := store.Authenticate(ctx, key)
	if err != nil || tenant != "acme" {
		t.Fatalf("Authenticate = %q, %v, want acme", tenant, err)
	}

	r = b.run(t, "apikey", "revoke", id)
	if r.code != exitOK || r.stdout != "" {
		t.Fatalf("revoke: exit %d, stdout %q, stderr %q; want 0", r.code, r.stdout, r.stderr)
	}
	if _, err := store.Authenticate(ctx, key); !errors.Is(err, apikey.ErrUnauthorized) {
		t.Errorf("Authenticate after revoke: %v, want ErrUnauthorized", err)
	}
	if r = b.run(t, "apikey", "revoke", id); r.code != exitOK {
		t.Errorf("revoke again: exit %d, stderr %q, want 0", r.code, r.stderr)
	}

	// The whole key names its id too.
	r = b.run(t, "apikey", "create", "--tenant", "globex", "--table", b.table)
	other := strings.TrimSpace(r.stdout)
	if r.code != exitOK {
		t.Fatalf("create: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = b.run(t, "apikey", "revoke", other); r.code != exitOK || strings.Contains(r.stderr, other) {
		t.Errorf("revoke by whole key: exit %d, stderr %q; want 0 without echoing the key", r.code, r.stderr)
	}
	if _, err := store.Authenticate(ctx, other); !errors.Is(err, apikey.ErrUnauthorized) {
		t.Errorf("Authenticate after revoke by whole key: %v, want ErrUnauthorized", err)
	}

	errs := []struct {
		name string
		args []string
		want string
	}{
		{"RevokeUnknown", []string{"apikey", "revoke", "0123456789abcdef"}, "no API key with id 0123456789abcdef"},
		{"RevokeMalformed", []string{"apikey", "revoke", "not-an-id"}, `"not-an-id" is not a key id`},
		{"CreateBadTenant", []string{"apikey", "create", "--tenant", "acme corp"}, `tenant "acme corp" is not 1 to 64`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			oneLineError(t, b.run(t, tt.args...), tt.want)
		})
	}
}
