// Package opstate keeps what an operator's `sendonce status` reads beside
// the rows: the providers a sender or reconcile worker found down or
// paused, and the last reconcile run. Two items of the one table
// (package tableschema):
//
//	ops#providers    one attribute per provider and state,
//	                 "down#<provider>" or "paused#<provider>": the Unix
//	                 second the state lasts until; "up#<provider>": the
//	                 Unix second it last answered again after an outage
//	ops#reconcile    the last reconcile run: "at" (Unix milliseconds) and
//	                 "summary" (its report, JSON)
//
// What it costs: a provider's state is written when a container learns
// it (a provider becomes known down: dispatch.Health.Down; a Retry-After
// pauses it: package pace; it answers again after an outage), at most
// once per cool-down, pause or recovery per container; the reconcile run
// once per run. One write each, never on a message's path when providers
// answer. The reconciler reads the providers' item (Providers: one
// strongly consistent GetItem, one read unit) once per hand-out, and
// every 2 s while it watches for a provider's recovery
// (reconcile.Reconciler.Watch).
package opstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// The items' partition keys.
const (
	ProvidersKey = "ops#providers"
	ReconcileKey = "ops#reconcile"
)

// Provider states.
const (
	// Down: its latest sends in a row were refused (dispatch.Health.Down).
	Down = "down"
	// Paused: it answered with a Retry-After, and no container sends to
	// it until then (package pace).
	Paused = "paused"
	// Up: it answered again after it was known down (the "until" of an
	// Up state is when it did).
	Up = "up"
)

// Store writes the items through DB into Table. The zero Store (no DB)
// writes nothing.
type Store struct {
	DB    tableschema.UpdateAPI
	Table string
}

// ProviderState records that provider is in state (Down or Paused) until
// until. A later until never shortens an earlier one.
func (s Store) ProviderState(ctx context.Context, provider, state string, until time.Time) error {
	if s.DB == nil {
		return nil
	}
	a := expression.Name(state + "#" + provider)
	u := until.Unix()
	update := expression.Set(a, expression.Value(u))
	cond := expression.AttributeNotExists(a).Or(a.LessThan(expression.Value(u)))
	err := tableschema.Update(ctx, s.DB, s.Table, ProvidersKey, update, cond)
	if _, failed := tableschema.ConditionFailed(err); err != nil && !failed {
		return fmt.Errorf("opstate: record %s %s: %w", provider, state, err)
	}
	return nil
}

// ReconcileRun records a reconcile run that ended at at, with summary
// (its report, encoded as JSON).
func (s Store) ReconcileRun(ctx context.Context, at time.Time, summary any) error {
	if s.DB == nil {
		return nil
	}
	raw, err := json.Marshal(summary)
	if err != nil {
		return fmt.Errorf("opstate: reconcile run: %w", err)
	}
	expr, err := expression.NewBuilder().WithUpdate(
		expression.Set(expression.Name("at"), expression.Value(at.UnixMilli())).
			Set(expression.Name("summary"), expression.Value(string(raw)))).Build()
	if err != nil {
		return err
	}
	_, err = s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.Table), Key: tableschema.Key(ReconcileKey), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return fmt.Errorf("opstate: reconcile run: %w", err)
	}
	return nil
}

// Provider is what the providers' item says of one provider for the
// reconciler (Providers).
type Provider struct {
	// DownUntil is when its latest known-down state ends (zero: never
	// recorded down).
	DownUntil time.Time
	// UpAt is when it last answered again after an outage (zero: never
	// recorded).
	UpAt time.Time
}

// Providers reads the providers' item (one strongly consistent GetItem)
// and returns each provider's down and up states, whether or not they
// have passed. The zero Store returns none.
func (s Store) Providers(ctx context.Context) (map[string]Provider, error) {
	if s.DB == nil {
		return nil, nil
	}
	db, ok := s.DB.(tableschema.GetAPI)
	if !ok {
		return nil, errors.New("opstate: providers: the client cannot GetItem")
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), Key: tableschema.Key(ProvidersKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("opstate: providers: %w", err)
	}
	ps := map[string]Provider{}
	for name, v := range out.Item {
		state, provider, ok := cutState(name)
		u, err := strconv.ParseInt(n(v), 10, 64)
		if !ok || err != nil || state != Down && state != Up {
			continue
		}
		p := ps[provider]
		if state == Down {
			p.DownUntil = time.Unix(u, 0).UTC()
		} else {
			p.UpAt = time.Unix(u, 0).UTC()
		}
		ps[provider] = p
	}
	return ps, nil
}

// cutState splits an attribute of the providers' item,
// "<state>#<provider>", into its state and provider.
func cutState(attr string) (state, provider string, ok bool) {
	return strings.Cut(attr, "#")
}

// ProviderStatus is one provider's recorded state.
type ProviderStatus struct {
	Provider string    `json:"provider"`
	State    string    `json:"state"`
	Until    time.Time `json:"until"`
}

// Run is the last reconcile run.
type Run struct {
	At      time.Time       `json:"at"`
	Summary json.RawMessage `json:"summary,omitempty"`
}

// Status is what the items say.
type Status struct {
	// Providers are the states that last past now, by provider and state.
	Providers []ProviderStatus
	// Reconcile is the last run, nil when none was recorded.
	Reconcile *Run
}

// Read reads both items through db from table (one BatchGetItem, strongly
// consistent) and returns the provider states that last past now.
func Read(ctx context.Context, db interface {
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}, table string, now time.Time) (Status, error) {
	out, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{tableschema.Key(ProvidersKey), tableschema.Key(ReconcileKey)}, ConsistentRead: aws.Bool(true)},
	}})
	if err != nil {
		return Status{}, fmt.Errorf("opstate: read: %w", err)
	}
	var st Status
	for _, item := range out.Responses[table] {
		switch s(item[tableschema.PartitionKey]) {
		case ProvidersKey:
			for name, v := range item {
				state, provider, ok := strings.Cut(name, "#")
				if !ok || state != Down && state != Paused {
					continue
				}
				if u, err := strconv.ParseInt(n(v), 10, 64); err == nil && time.Unix(u, 0).After(now) {
					st.Providers = append(st.Providers, ProviderStatus{Provider: provider, State: state, Until: time.Unix(u, 0).UTC()})
				}
			}
		case ReconcileKey:
			ms, err := strconv.ParseInt(n(item["at"]), 10, 64)
			if err != nil {
				continue
			}
			r := &Run{At: time.UnixMilli(ms).UTC()}
			if raw := s(item["summary"]); json.Valid([]byte(raw)) {
				r.Summary = json.RawMessage(raw)
			}
			st.Reconcile = r
		}
	}
	slices.SortFunc(st.Providers, func(a, b ProviderStatus) int {
		return strings.Compare(a.Provider+"#"+a.State, b.Provider+"#"+b.State)
	})
	return st, nil
}

func s(v types.AttributeValue) string {
	if x, ok := v.(*types.AttributeValueMemberS); ok {
		return x.Value
	}
	return ""
}

func n(v types.AttributeValue) string {
	if x, ok := v.(*types.AttributeValueMemberN); ok {
		return x.Value
	}
	return ""
}
