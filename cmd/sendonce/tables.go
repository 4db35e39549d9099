package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/tableschema"
)

func createTablesCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "create-tables [--table NAME] [--event-index] [--wait DURATION]",
		Short: "create the sendonce table (as template.yaml declares it), idempotently",
		Long: `
Creates the one sendonce table with the schema template.yaml declares
(internal/tableschema): partition key pk (S), on-demand billing, the sparse
"attention" global secondary index (attn_pk HASH, attn_sk RANGE, all
attributes projected), TTL enabled on expires_at and, with --event-index,
the "event" index (evt_pk HASH, keys only; template.yaml's EventIndex
parameter). It waits until the table is ACTIVE.

The event index makes "sendonce find --tenant T --event E" a query instead
of a scan of the table, and costs one more write unit per message (every
claim writes an entry: 3 per first send instead of 2).

The endpoint, region and credentials come from the SDK's standard variables:
for DynamoDB Local, set AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 and
dummy AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION (after "make
services-start", "source .local/env" sets them).

Running it again is safe: a table that already exists with the same key
schema, attribute types, indexes and TTL attribute is success (TTL is
enabled on it if it was off), with a message on stderr; a table that has the
event index is accepted without --event-index too. A table that lacks only
indexes (one made by an older sendonce, or without --event-index) gets them
added. A table of that name with any other schema is an error (exit status
1) naming the differences; nothing is changed. Billing mode, encryption and
backups are not compared.`,
		Args:        noArgs,
		Annotations: map[string]string{annotValue: "prints nothing on stdout"},
	}
	tableF := tableFlag(c)
	wait := c.Flags().Duration("wait", 5*time.Minute, "`DURATION`: how long to wait for the table to become ACTIVE")
	eventIndex := c.Flags().Bool("event-index", false, `add the "event" index`)
	c.RunE = func(c *cobra.Command, _ []string) error {
		table, err := a.table(c, *tableF)
		if err != nil {
			return err
		}
		if *wait <= 0 {
			return &usageError{cmd: c, msg: "--wait must be positive"}
		}
		db, err := a.dynamoClient(c.Context())
		if err != nil {
			return err
		}
		msg, err := createTable(c.Context(), db, table, *eventIndex, *wait)
		if err != nil {
			return err
		}
		a.note("%s", msg)
		return nil
	}
	return c
}

// tableAPI is the part of the DynamoDB client create-tables uses.
type tableAPI interface {
	dynamodb.DescribeTableAPIClient
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// addIndexes upgrades a table created by an older sendonce: when the only
// differences from want are missing global secondary indexes whose key
// attributes the table does not define otherwise, it creates them one
// UpdateTable at a time (DynamoDB's limit) and waits until each is ACTIVE.
// It returns the table's description afterwards and the indexes added;
// any other difference is left to schemaDiff to report.
func addIndexes(ctx context.Context, db tableAPI, want *dynamodb.CreateTableInput, got *types.TableDescription, wait time.Duration) (*types.TableDescription, []string, error) {
	have := map[string]bool{}
	for _, g := range got.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = true
	}
	var missing []types.GlobalSecondaryIndex
	for _, g := range want.GlobalSecondaryIndexes {
		if !have[aws.ToString(g.IndexName)] {
			missing = append(missing, g)
		}
	}
	if len(missing) == 0 || len(schemaDiff(want, got)) != len(missing) {
		return got, nil, nil // nothing to add, or other differences too
	}
	gotTypes, wantTypes := attrTypes(got.AttributeDefinitions), attrTypes(want.AttributeDefinitions)
	var added []string
	for _, g := range missing {
		var defs []types.AttributeDefinition
		for _, k := range g.KeySchema {
			name := aws.ToString(k.AttributeName)
			if t, ok := gotTypes[name]; ok && t != wantTypes[name] {
				return got, nil, nil // a conflicting attribute: report, change nothing
			}
			defs = append(defs, types.AttributeDefinition{AttributeName: k.AttributeName, AttributeType: wantTypes[name]})
		}
		_, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName:            want.TableName,
			AttributeDefinitions: defs,
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection,
			}}},
		})
		if err != nil {
			return got, added, fmt.Errorf("add index %s to table %s: %w", aws.ToString(g.IndexName), aws.ToString(want.TableName), err)
		}
		if got, err = waitIndexes(ctx, db, aws.ToString(want.TableName), wait); err != nil {
			return got, added, err
		}
		added = append(added, aws.ToString(g.IndexName))
	}
	return got, added, nil
}

// waitIndexes polls table until it and every index are ACTIVE.
func waitIndexes(ctx context.Context, db tableAPI, table string, wait time.Duration) (*types.TableDescription, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return nil, fmt.Errorf("wait for the indexes of table %s: %w", table, err)
		}
		ready := out.Table.TableStatus == types.TableStatusActive
		for _, g := range out.Table.GlobalSecondaryIndexes {
			ready = ready && g.IndexStatus == types.IndexStatusActive
		}
		if ready {
			return out.Table, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the indexes of table %s: %w", table, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// createTable creates table with tableschema's definition, or accepts an
// existing one with the same schema, waits until it is ACTIVE and makes
// sure TTL is on. It returns what it did, for stderr, or an error when the
// existing table's schema differs or a call fails.
func createTable(ctx context.Context, db tableAPI, table string, eventIndex bool, wait time.Duration) (string, error) {
	want := tableschema.CreateTableInput(table, tableschema.WithEventIndex(eventIndex))
	existed := false
	if _, err := db.CreateTable(ctx, want); err != nil {
		var inUse *types.ResourceInUseException
		if !errors.As(err, &inUse) {
			return "", fmt.Errorf("create table %s: %w", table, err)
		}
		existed = true
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 2*time.Second, 20*time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, wait)
	if err != nil {
		return "", fmt.Errorf("wait for table %s to become ACTIVE: %w", table, err)
	}
	desc := out.Table
	if existed && !eventIndex && slices.ContainsFunc(desc.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndexDescription) bool {
		return aws.ToString(g.IndexName) == tableschema.EventIndex
	}) {
		want = tableschema.CreateTableInput(table, tableschema.WithEventIndex(true)) // keep it: dropping an index is the operator's call
	}
	var added []string
	if existed {
		if desc, added, err = addIndexes(ctx, db, want, desc, wait); err != nil {
			return "", err
		}
	}
	if diff := schemaDiff(want, desc); len(diff) > 0 {
		return "", fmt.Errorf("table %s exists with a different schema, left unchanged: %s", table, strings.Join(diff, "; "))
	}
	enabled, err := ensureTTL(ctx, db, table)
	if err != nil {
		return "", err
	}
	switch {
	case len(added) > 0:
		return fmt.Sprintf("table %s already exists; added the global secondary index(es) %s it lacked (ACTIVE, TTL on %s)", table, strings.Join(added, ", "), tableschema.TTLAttribute), nil
	case !existed:
		return fmt.Sprintf("created table %s (ACTIVE, TTL on %s)", table, tableschema.TTLAttribute), nil
	case enabled:
		return fmt.Sprintf("table %s already exists with the sendonce schema; enabled TTL on %s", table, tableschema.TTLAttribute), nil
	default:
		return fmt.Sprintf("table %s already exists with the sendonce schema; nothing to do", table), nil
	}
}

// ensureTTL enables TTL on tableschema.TTLAttribute unless it is on (or
// being turned on) already, and reports whether it enabled it. TTL on
// another attribute, or TTL being disabled, is an error.
func ensureTTL(ctx context.Context, db tableAPI, table string) (bool, error) {
	out, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return false, fmt.Errorf("describe TTL of table %s: %w", table, err)
	}
	var (
		status types.TimeToLiveStatus
		attr   string
	)
	if d := out.TimeToLiveDescription; d != nil {
		status, attr = d.TimeToLiveStatus, aws.ToString(d.AttributeName)
	}
	switch status {
	case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
		if attr != tableschema.TTLAttribute {
			return false, fmt.Errorf("table %s exists with a different schema, left unchanged: TTL is on attribute %q, want %q", table, attr, tableschema.TTLAttribute)
		}
		return false, nil
	case types.TimeToLiveStatusDisabling:
		return false, fmt.Errorf("table %s: TTL is being disabled; run create-tables again once DynamoDB has finished (it allows re-enabling within about an hour)", table)
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(tableschema.TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return false, fmt.Errorf("enable TTL on %s of table %s: %w", tableschema.TTLAttribute, table, err)
	}
	return true, nil
}

// schemaDiff lists how got differs from want in what the code depends
// on: the table's key schema, the indexes' names, key schemas and
// projections, and the types of every key attribute. It is empty when they
// agree.
func schemaDiff(want *dynamodb.CreateTableInput, got *types.TableDescription) []string {
	if got == nil {
		return []string{"DescribeTable returned no table description"}
	}
	wantTypes := attrTypes(want.AttributeDefinitions)
	gotTypes := attrTypes(got.AttributeDefinitions)
	var diff []string
	if w, g := keyString(want.KeySchema, wantTypes), keyString(got.KeySchema, gotTypes); w != g {
		diff = append(diff, fmt.Sprintf("key schema is %s, want %s", g, w))
	}
	gotGSI := map[string]types.GlobalSecondaryIndexDescription{}
	for _, g := range got.GlobalSecondaryIndexes {
		gotGSI[aws.ToString(g.IndexName)] = g
	}
	for _, w := range want.GlobalSecondaryIndexes {
		name := aws.ToString(w.IndexName)
		g, ok := gotGSI[name]
		if !ok {
			diff = append(diff, fmt.Sprintf("global secondary index %q is missing", name))
			continue
		}
		delete(gotGSI, name)
		if w, g := keyString(w.KeySchema, wantTypes), keyString(g.KeySchema, gotTypes); w != g {
			diff = append(diff, fmt.Sprintf("index %q key schema is %s, want %s", name, g, w))
		}
		if w, g := projectionString(w.Projection), projectionString(g.Projection); w != g {
			diff = append(diff, fmt.Sprintf("index %q projects %s, want %s", name, g, w))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gotGSI)) {
		diff = append(diff, fmt.Sprintf("unexpected global secondary index %q", name))
	}
	for _, l := range got.LocalSecondaryIndexes {
		diff = append(diff, fmt.Sprintf("unexpected local secondary index %q", aws.ToString(l.IndexName)))
	}
	return diff
}

func attrTypes(defs []types.AttributeDefinition) map[string]types.ScalarAttributeType {
	m := make(map[string]types.ScalarAttributeType, len(defs))
	for _, d := range defs {
		m[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	return m
}

// keyString renders a key schema with its attribute types, HASH first:
// "pk (S, HASH)", "attn_pk (S, HASH) + attn_sk (S, RANGE)".
func keyString(ks []types.KeySchemaElement, typ map[string]types.ScalarAttributeType) string {
	ks = slices.Clone(ks)
	slices.SortStableFunc(ks, func(a, b types.KeySchemaElement) int {
		return strings.Compare(string(a.KeyType), string(b.KeyType)) // HASH < RANGE
	})
	parts := make([]string, len(ks))
	for i, k := range ks {
		name := aws.ToString(k.AttributeName)
		t := string(typ[name])
		if t == "" {
			t = "?"
		}
		parts[i] = fmt.Sprintf("%s (%s, %s)", name, t, k.KeyType)
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " + ")
}

func projectionString(p *types.Projection) string {
	if p == nil {
		return "(none)"
	}
	s := string(p.ProjectionType)
	if len(p.NonKeyAttributes) > 0 {
		attrs := slices.Sorted(slices.Values(p.NonKeyAttributes))
		s += " [" + strings.Join(attrs, ", ") + "]"
	}
	return s
}
