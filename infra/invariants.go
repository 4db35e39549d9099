package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/decide"
	"github.com/sendonce/sendonce/internal/tableschema"
)

// The margins the invariants demand.
const (
	// VisibilityFactor: the queue's visibility timeout must be at least this
	// many sender timeouts (plus the batching window), AWS's guidance for
	// Lambda SQS event sources, so a batch still running is never handed
	// to a second worker.
	VisibilityFactor = 6
	// RedeliveryFactor: maxReceiveCount × visibility timeout must be at
	// least this many claim timeouts, so a message whose claim is held by a
	// dead worker is redelivered after the lease passed before it is
	// dead-lettered.
	RedeliveryFactor = 2
)

// ReconcileHorizon bounds how long after its message's last possible
// redelivery a ledger row may still be reconciled (the schedule times the
// attempts, plus outages). No function reads it, so it is a planning
// bound of the retention invariant rather than a template parameter.
const ReconcileHorizon = 24 * time.Hour

// ErrInvariant is matched (errors.Is) by every error a check returns
// because the template breaks the property (rather than because it could
// not be read).
var ErrInvariant = errors.New("infra: invariant broken")

func broken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
}

// Invariant is one arithmetic property between template parameters.
type Invariant struct {
	// Name identifies the invariant (a test's subtest name).
	Name string
	// Why explains what breaks when it does not hold.
	Why string
	// DeployTime is true when the parameters' allowed ranges and the
	// template's Rules make CloudFormation reject every combination that
	// breaks the invariant. Otherwise only the defaults are known to hold
	// it: Rules cannot do arithmetic, and the parameters it relates take
	// ranges that Rules cannot enumerate.
	DeployTime bool
	check      func(e *eval) error
}

// Invariants lists the arithmetic invariants template.yaml must hold.
var Invariants = []Invariant{
	{"VisibilityCoversSenderTimeout", "a batch still running becomes visible again and a second worker takes it", true, checkVisibility(false)},
	{"VisibilityCoversBatchingWindow", "a batch gathered for the whole window and then running becomes visible again", false, checkVisibility(true)},
	{"ClaimOutlivesProviderCall", "a second worker takes the key over while the first is still sending", true, checkClaim},
	{"RedeliveryOutlivesClaim", "a message held by a dead worker's claim is dead-lettered before its lease passes", false, checkRedelivery},
	{"LedgerOutlivesMessages", "a late redelivery finds no ledger row and sends again", false, checkRetention},
	{"DLQOutlivesQueue", "a dead-lettered message expires before anyone can look at it", false, checkDLQRetention},
	{"MaxAgeCoversRedelivery", "the reconciler abandons a message SQS may still deliver", false, checkMaxAge},
	{"RetentionOutlivesMaxAge", "a row the reconciler still works on expires", false, checkMaxAgeRetention},
}

// Check returns nil when the template holds inv with parameter values p,
// an error matching ErrInvariant when it does not, and an error matching
// ErrUnresolved when the template cannot be read as the check expects.
func (t *Template) Check(inv Invariant, p Values) error {
	return inv.check(&eval{t: t, p: p, read: map[string]bool{}})
}

// Counterexamples returns every combination of the extremes (Extremes) of
// the parameters inv reads that the template's Rules accept and that
// breaks inv; every other parameter keeps its default.
func (t *Template) Counterexamples(inv Invariant) ([]Values, error) {
	read := map[string]bool{}
	for {
		n := len(read)
		var bad []Values
		for _, p := range t.combinations(slices.Sorted(maps.Keys(read))) {
			err := inv.check(&eval{t: t, p: p, read: read})
			if err != nil && !errors.Is(err, ErrInvariant) {
				return nil, fmt.Errorf("%s: %w", inv.Name, err)
			}
			if vs, verr := t.Violations(p); verr != nil {
				return nil, verr
			} else if err != nil && len(vs) == 0 {
				bad = append(bad, p)
			}
		}
		if len(read) == n { // no parameter read that was not varied
			return bad, nil
		}
	}
}

// combinations returns the defaults with names set to each combination of
// their extremes.
func (t *Template) combinations(names []string) []Values {
	out := []Values{t.Defaults()}
	for _, name := range names {
		var next []Values
		for _, p := range out {
			for _, v := range t.Extremes(name) {
				next = append(next, p.With(name, v))
			}
		}
		out = next
	}
	return out
}

// senderQueue returns the sender's one SQS event and its queue.
func (e *eval) senderQueue() (event, queue map[string]any, err error) {
	var found []map[string]any
	for _, ev := range mapOf(props(e.t.Resources[SenderFunction])["Events"]) {
		if mapOf(ev)["Type"] == "SQS" {
			found = append(found, props(mapOf(ev)))
		}
	}
	if len(found) != 1 {
		return nil, nil, broken("%s has %d SQS events, want 1", SenderFunction, len(found))
	}
	name, ok := getAttTarget(found[0]["Queue"], "Arn")
	if q := e.t.Resources[name]; ok && q["Type"] == "AWS::SQS::Queue" {
		return found[0], props(q), nil
	}
	return nil, nil, broken("%s's SQS event does not name a queue of this template", SenderFunction)
}

func checkVisibility(window bool) func(e *eval) error {
	return func(e *eval) error {
		ev, q, err := e.senderQueue()
		if err != nil {
			return err
		}
		timeout, err := e.num(props(e.t.Resources[SenderFunction])["Timeout"], 3)
		if err != nil {
			return err
		}
		w := 0
		if window {
			if w, err = e.num(ev["MaximumBatchingWindowInSeconds"], 0); err != nil {
				return err
			}
		}
		vis, err := e.num(q["VisibilityTimeout"], 30)
		if err != nil {
			return err
		}
		if want := VisibilityFactor*timeout + w; vis < want {
			return broken("%s: queue visibility timeout %ds < %d × sender timeout %ds + batching window %ds", e, vis, VisibilityFactor, timeout, w)
		}
		return nil
	}
}

// durEnv resolves environment variable name of function fn to a duration.
func (e *eval) durEnv(fn, name string) (time.Duration, error) {
	v, ok := e.t.env(fn, name)
	if !ok {
		return 0, broken("%s: %s is not set", fn, name)
	}
	d, err := e.dur(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", fn, name, err)
	}
	return d, nil
}

func checkClaim(e *eval) error {
	for _, fn := range []string{SenderFunction, ReconcilerFunction} {
		claim, err := e.durEnv(fn, "SENDONCE_CLAIM_TIMEOUT")
		if err != nil {
			return err
		}
		provider, err := e.durEnv(fn, "SENDONCE_PROVIDER_TIMEOUT")
		if err != nil {
			return err
		}
		// The functions check the same rule at start-up.
		if err := decide.CheckClaimTimeout(claim, provider); err != nil {
			return broken("%s: %s: %v", e, fn, err)
		}
	}
	return nil
}

func checkRedelivery(e *eval) error {
	_, q, err := e.senderQueue()
	if err != nil {
		return err
	}
	claim, err := e.durEnv(SenderFunction, "SENDONCE_CLAIM_TIMEOUT")
	if err != nil {
		return err
	}
	vis, err := e.num(q["VisibilityTimeout"], 30)
	if err != nil {
		return err
	}
	receives, err := e.num(mapOf(q["RedrivePolicy"])["maxReceiveCount"], 0)
	if err != nil {
		return err
	}
	if total := time.Duration(receives*vis) * time.Second; total < RedeliveryFactor*claim {
		return broken("%s: maxReceiveCount %d × visibility %ds = %v < %d × claim timeout %v", e, receives, vis, total, RedeliveryFactor, claim)
	}
	return nil
}

// retentions returns how long SQS may keep a message: in the
// notification queue, and then in its dead-letter queue.
func (e *eval) retentions() (queue, dlq time.Duration, err error) {
	_, q, err := e.senderQueue()
	if err != nil {
		return 0, 0, err
	}
	name, _ := getAttTarget(mapOf(q["RedrivePolicy"])["deadLetterTargetArn"], "Arn")
	d, ok := e.t.Resources[name]
	if !ok || d["Type"] != "AWS::SQS::Queue" {
		return 0, 0, broken("the notification queue has no RedrivePolicy to a queue of this template")
	}
	qs, err := e.num(q["MessageRetentionPeriod"], 345600)
	if err != nil {
		return 0, 0, err
	}
	ds, err := e.num(props(d)["MessageRetentionPeriod"], 345600)
	return time.Duration(qs) * time.Second, time.Duration(ds) * time.Second, err
}

func checkRetention(e *eval) error {
	queue, dlq, err := e.retentions()
	if err != nil {
		return err
	}
	if _, ok := e.t.env(SenderFunction, "SENDONCE_RETENTION"); !ok {
		return broken("%s: SENDONCE_RETENTION is not set", SenderFunction)
	}
	for _, fn := range e.t.functionNames() {
		if _, ok := e.t.env(fn, "SENDONCE_RETENTION"); !ok {
			continue
		}
		retention, err := e.durEnv(fn, "SENDONCE_RETENTION")
		if err != nil {
			return err
		}
		if need := queue + dlq + ReconcileHorizon; retention < need {
			return broken("%s: %s: ledger retention %v < queue %v + DLQ %v + reconcile horizon %v", e, fn, retention, queue, dlq, ReconcileHorizon)
		}
	}
	return nil
}

func checkDLQRetention(e *eval) error {
	queue, dlq, err := e.retentions()
	if err == nil && dlq < queue {
		err = broken("%s: DLQ retention %v < queue retention %v", e, dlq, queue)
	}
	return err
}

// maxAge returns how long the reconciler keeps trying a row.
func (e *eval) maxAge() (time.Duration, error) {
	if _, ok := e.t.env(ReconcilerFunction, "SENDONCE_MAX_AGE"); !ok {
		return decide.DefaultMaxAge, nil
	}
	return e.durEnv(ReconcilerFunction, "SENDONCE_MAX_AGE")
}

func checkMaxAge(e *eval) error {
	queue, dlq, err := e.retentions()
	if err != nil {
		return err
	}
	age, err := e.maxAge()
	if err == nil && age < queue+dlq {
		err = broken("%s: reconciler max age %v < queue retention %v + DLQ retention %v", e, age, queue, dlq)
	}
	return err
}

func checkMaxAgeRetention(e *eval) error {
	age, err := e.maxAge()
	if err != nil {
		return err
	}
	retention, err := e.durEnv(ReconcilerFunction, "SENDONCE_RETENTION")
	if err == nil && retention < age+ReconcileHorizon {
		err = broken("%s: ledger retention %v < reconciler max age %v + reconcile horizon %v", e, retention, age, ReconcileHorizon)
	}
	return err
}

// CheckTableSchema returns an error matching ErrInvariant unless every
// DynamoDB table of the template (the single-Region and the global one)
// declares the attributes, keys and indexes (in the same order), the
// billing mode and the TTL attribute of package tableschema, which the code
// and create-tables use, and no local index.
func (t *Template) CheckTableSchema() error {
	for _, on := range []bool{false, true} {
		if err := t.checkTableSchema(on); err != nil {
			return err
		}
	}
	return nil
}

// checkTableSchema compares the tables with EventIndex = on against
// tableschema's schema for that choice.
func (t *Template) checkTableSchema(on bool) error {
	// The SDK's field names are CloudFormation's property names.
	data, err := json.Marshal(tableschema.CreateTableInput("ledger", tableschema.WithEventIndex(on)))
	if err != nil {
		return err
	}
	var want map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		return err
	}
	want = dropNulls(want).(map[string]any)
	p := t.Defaults()
	p["EventIndex"] = strconv.FormatBool(on)
	e := &eval{t: t, p: p, read: map[string]bool{}}
	tables := 0
	for _, name := range slices.Sorted(maps.Keys(t.Resources)) {
		if typ := t.Resources[name]["Type"]; typ != "AWS::DynamoDB::Table" && typ != "AWS::DynamoDB::GlobalTable" {
			continue
		}
		tables++
		pr := props(t.Resources[name])
		for _, k := range []string{"AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode", "LocalSecondaryIndexes"} {
			got, err := e.choose(pr[k])
			if err != nil {
				return fmt.Errorf("%s: %s: %w", name, k, err)
			}
			if !reflect.DeepEqual(got, want[k]) {
				return broken("%s: %s with EventIndex=%t is %v, want %v (package tableschema)", name, k, on, got, want[k])
			}
		}
		if ttl := mapOf(pr["TimeToLiveSpecification"])["AttributeName"]; ttl != tableschema.TTLAttribute {
			return broken("%s: TTL attribute %v, want %s", name, ttl, tableschema.TTLAttribute)
		}
	}
	if tables == 0 {
		return broken("no DynamoDB table")
	}
	return nil
}

// choose resolves the Fn::If members of list v by their conditions,
// dropping those that choose AWS::NoValue; other values are returned as
// they are.
func (e *eval) choose(v any) (any, error) {
	items, ok := v.([]any)
	if !ok {
		return v, nil
	}
	out := []any{}
	for _, it := range items {
		if args, ok := mapOf(it)["Fn::If"].([]any); ok && len(args) == 3 {
			b, err := e.cond(map[string]any{"Condition": args[0]})
			if err != nil {
				return nil, err
			}
			it = args[2]
			if b {
				it = args[1]
			}
			if ref, _ := mapOf(it)["Ref"].(string); ref == "AWS::NoValue" {
				continue
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// dropNulls removes the null members of JSON objects in v.
func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
			} else {
				x[k] = dropNulls(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}
