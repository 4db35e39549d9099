package infra

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// Logical ids of the template's resources that the checks read.
const (
	SenderFunction     = "SenderFunction"
	ReconcilerFunction = "ReconcilerFunction"
	functionType       = "AWS::Serverless::Function"
)

// ReconcileHorizon bounds how long after its message's last possible
// redelivery a ledger row may still be reconciled (the schedule times the
// attempts, plus outages). No function reads it, so it is a planning
// bound of the retention invariant rather than a template parameter (an
// unused parameter is one more question for `sam deploy --guided`).
const ReconcileHorizon = 24 * time.Hour

// ErrInvariant is matched (errors.Is) by every error an Invariant's Check
// returns because the template breaks the invariant (rather than because it
// could not be read).
var ErrInvariant = errors.New("infra: invariant broken")

// Invariant is one property template.yaml must have.
type Invariant struct {
	// Name identifies the invariant (a test's subtest name).
	Name string
	// Why explains what breaks when it does not hold.
	Why string
	// Check returns nil when the template holds the invariant with
	// parameter values p, an error matching ErrInvariant when it does not,
	// and another error when the template cannot be read as expected.
	Check func(t *Template, p Values) error
}

// Invariants lists every invariant template.yaml must hold.
var Invariants = []Invariant{
	{"VisibilityCoversSender", "a batch still running becomes visible again and a second worker takes it", checkVisibility},
	{"ClaimOutlivesProviderCall", "a second worker takes the key over while the first is still sending", checkClaim},
	{"RedeliveryOutlivesClaim", "a message held by a dead worker's claim is dead-lettered before its lease passes", checkRedelivery},
	{"LedgerOutlivesMessages", "a late redelivery finds no ledger row and sends again", checkRetention},
	{"DLQOutlivesQueue", "a dead-lettered message expires before anyone can look at it", checkDLQRetention},
	{"SenderReportsBatchItemFailures", "one failed record makes the whole batch redeliver", checkBatchItemFailures},
	{"TableMatchesSchema", "the deployed table differs from what the code and create-tables expect", checkTableSchema},
	{"FunctionsArm64AL2023", "a function is built or run for the wrong platform", checkFunctions},
	{"OwnRolePerFunction", "a function holds another function's permissions", checkOwnRoles},
	{"NoWildcardPolicies", "a role is granted every action, or every table", checkPolicies},
	{"LeastPrivilegePerFunction", "a function can read or write another function's records, or call what it never calls", checkGrants},
	{"SNSPublishScoped", "a function can publish to every topic and endpoint of the account", checkSNSPublish},
	{"PermissionsBoundaryOnEveryRole", "a role escapes the organisation's permissions boundary", checkBoundary},
	{"ParametersDescribedAndGrouped", "the guided deploy asks a question without saying what it means or accepts anything", checkParameters},
	{"GradualDeployment", "a bad release takes all traffic at once and is not rolled back", checkGradualDeployment},
}

func broken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
}

// resource returns resource name, which must exist with type typ.
func (t *Template) resource(name, typ string) (*Resource, error) {
	r, ok := t.Resources[name]
	if !ok {
		return nil, broken("no resource %s", name)
	}
	if r.Type != typ {
		return nil, broken("resource %s is %s, want %s", name, r.Type, typ)
	}
	return r, nil
}

// functionProp returns property prop of function fn, or of
// Globals.Function when the function does not set it.
func (t *Template) functionProp(fn *Resource, prop string) any {
	if v, ok := fn.Properties[prop]; ok {
		return v
	}
	return mapOf(t.Globals["Function"])[prop]
}

// env returns environment variable name of function fn (unevaluated).
func (t *Template) env(fn *Resource, name string) (any, bool) {
	vars := mapOf(mapOf(fn.Properties["Environment"])["Variables"])
	if v, ok := vars[name]; ok {
		return v, true
	}
	v, ok := mapOf(mapOf(mapOf(t.Globals["Function"])["Environment"])["Variables"])[name]
	return v, ok
}

// getAttTarget returns the resource named by {"Fn::GetAtt": [name, attr]}.
func getAttTarget(v any, attr string) (string, bool) {
	args, ok := mapOf(v)["Fn::GetAtt"].([]any)
	if !ok || len(args) != 2 {
		return "", false
	}
	name, _ := args[0].(string)
	a, _ := args[1].(string)
	return name, a == attr && name != ""
}

// senderEvent returns the sender's SQS event properties and its queue.
func (t *Template) senderEvent() (map[string]any, *Resource, error) {
	fn, err := t.resource(SenderFunction, functionType)
	if err != nil {
		return nil, nil, err
	}
	var found []map[string]any
	for _, name := range sortedKeys(mapOf(fn.Properties["Events"])) {
		ev := mapOf(mapOf(fn.Properties["Events"])[name])
		if ev["Type"] == "SQS" {
			found = append(found, mapOf(ev["Properties"]))
		}
	}
	if len(found) != 1 {
		return nil, nil, broken("%s has %d SQS events, want 1", SenderFunction, len(found))
	}
	qname, ok := getAttTarget(found[0]["Queue"], "Arn")
	if !ok {
		return nil, nil, broken("%s's SQS event does not name a queue of this template (!GetAtt Queue.Arn)", SenderFunction)
	}
	q, err := t.resource(qname, "AWS::SQS::Queue")
	if err != nil {
		return nil, nil, err
	}
	return found[0], q, nil
}

// deadLetterQueue returns the DLQ of queue q.
func (t *Template) deadLetterQueue(q *Resource) (*Resource, error) {
	name, ok := getAttTarget(mapOf(q.Properties["RedrivePolicy"])["deadLetterTargetArn"], "Arn")
	if !ok {
		return nil, broken("the notification queue has no RedrivePolicy to a queue of this template")
	}
	return t.resource(name, "AWS::SQS::Queue")
}

// intProp resolves an integer property, or def when it is absent.
func (t *Template) intProp(props map[string]any, name string, def int, p Values) (int, error) {
	v, ok := props[name]
	if !ok {
		return def, nil
	}
	r, err := t.Eval(v, p)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if r == NoValue {
		return def, nil
	}
	return t.evalInt(r, p)
}

func checkVisibility(t *Template, p Values) error {
	ev, q, err := t.senderEvent()
	if err != nil {
		return err
	}
	fn := t.Resources[SenderFunction]
	timeout := 3 // Lambda's default
	if v := t.functionProp(fn, "Timeout"); v != nil {
		if timeout, err = t.evalInt(v, p); err != nil {
			return fmt.Errorf("%s Timeout: %w", SenderFunction, err)
		}
	}
	window, err := t.intProp(ev, "MaximumBatchingWindowInSeconds", 0, p)
	if err != nil {
		return err
	}
	vis, err := t.intProp(q.Properties, "VisibilityTimeout", 30, p)
	if err != nil {
		return err
	}
	if want := VisibilityFactor*timeout + window; vis < want {
		return broken("queue visibility timeout %ds < %d × sender timeout %ds + batching window %ds = %ds", vis, VisibilityFactor, timeout, window, want)
	}
	return nil
}

// claimAndProvider returns the claim and provider timeouts function fn is
// given.
func (t *Template) claimAndProvider(fn *Resource, p Values) (claim, provider time.Duration, err error) {
	cv, ok := t.env(fn, "SENDONCE_CLAIM_TIMEOUT")
	if !ok {
		return 0, 0, broken("SENDONCE_CLAIM_TIMEOUT is not set")
	}
	pv, ok := t.env(fn, "SENDONCE_PROVIDER_TIMEOUT")
	if !ok {
		return 0, 0, broken("SENDONCE_PROVIDER_TIMEOUT is not set")
	}
	if claim, err = t.evalDuration(cv, p); err != nil {
		return 0, 0, fmt.Errorf("SENDONCE_CLAIM_TIMEOUT: %w", err)
	}
	if provider, err = t.evalDuration(pv, p); err != nil {
		return 0, 0, fmt.Errorf("SENDONCE_PROVIDER_TIMEOUT: %w", err)
	}
	return claim, provider, nil
}

func checkClaim(t *Template, p Values) error {
	for _, name := range []string{SenderFunction, ReconcilerFunction} {
		fn, err := t.resource(name, functionType)
		if err != nil {
			return err
		}
		claim, provider, err := t.claimAndProvider(fn, p)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// The functions check the same rule at start-up (package decide).
		if err := decide.CheckClaimTimeout(claim, provider); err != nil {
			return broken("%s: %v", name, err)
		}
	}
	return nil
}

func checkRedelivery(t *Template, p Values) error {
	_, q, err := t.senderEvent()
	if err != nil {
		return err
	}
	claim, _, err := t.claimAndProvider(t.Resources[SenderFunction], p)
	if err != nil {
		return err
	}
	vis, err := t.intProp(q.Properties, "VisibilityTimeout", 30, p)
	if err != nil {
		return err
	}
	receives, err := t.intProp(mapOf(q.Properties["RedrivePolicy"]), "maxReceiveCount", 0, p)
	if err != nil {
		return err
	}
	total := time.Duration(receives*vis) * time.Second
	if total < RedeliveryFactor*claim {
		return broken("maxReceiveCount %d × visibility %ds = %v < %d × claim timeout %v", receives, vis, total, RedeliveryFactor, claim)
	}
	return nil
}

// queueRetentions returns the notification queue's and its DLQ's message
// retention.
func (t *Template) queueRetentions(p Values) (queue, dlq time.Duration, err error) {
	_, q, err := t.senderEvent()
	if err != nil {
		return 0, 0, err
	}
	d, err := t.deadLetterQueue(q)
	if err != nil {
		return 0, 0, err
	}
	qs, err := t.intProp(q.Properties, "MessageRetentionPeriod", 345600, p)
	if err != nil {
		return 0, 0, err
	}
	ds, err := t.intProp(d.Properties, "MessageRetentionPeriod", 345600, p)
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(qs) * time.Second, time.Duration(ds) * time.Second, nil
}

func checkRetention(t *Template, p Values) error {
	queue, dlq, err := t.queueRetentions(p)
	if err != nil {
		return err
	}
	horizon := ReconcileHorizon
	need := queue + dlq + horizon
	for _, name := range sortedKeys(t.Resources) {
		fn := t.Resources[name]
		if fn.Type != functionType {
			continue
		}
		rv, ok := t.env(fn, "SENDONCE_RETENTION")
		if !ok {
			continue
		}
		retention, err := t.evalDuration(rv, p)
		if err != nil {
			return fmt.Errorf("%s: SENDONCE_RETENTION: %w", name, err)
		}
		if retention < need {
			return broken("%s: ledger retention %v < queue %v + DLQ %v + reconcile horizon %v", name, retention, queue, dlq, horizon)
		}
	}
	if _, ok := t.env(t.Resources[SenderFunction], "SENDONCE_RETENTION"); !ok {
		return broken("%s: SENDONCE_RETENTION is not set", SenderFunction)
	}
	return nil
}

func checkDLQRetention(t *Template, p Values) error {
	queue, dlq, err := t.queueRetentions(p)
	if err != nil {
		return err
	}
	if dlq < queue {
		return broken("DLQ retention %v < queue retention %v", dlq, queue)
	}
	return nil
}

func checkBatchItemFailures(t *Template, _ Values) error {
	ev, _, err := t.senderEvent()
	if err != nil {
		return err
	}
	types, _ := ev["FunctionResponseTypes"].([]any)
	if !slices.Contains(types, any("ReportBatchItemFailures")) {
		return broken("the sender's SQS event lacks FunctionResponseTypes [ReportBatchItemFailures]")
	}
	return nil
}

// keySchema renders a KeySchema as "name:TYPE" strings, in order.
func keySchema(v any) []string {
	var out []string
	items, _ := v.([]any)
	for _, it := range items {
		m := mapOf(it)
		name, _ := Scalar(m["AttributeName"])
		typ, _ := Scalar(m["KeyType"])
		out = append(out, name+":"+typ)
	}
	return out
}

func checkTableSchema(t *Template, p Values) error {
	want := tableschema.CreateTableInput("ledger", tableschema.WithEventIndex(p["EventIndex"] == "true"))
	var wantAttrs, wantKeys []string
	for _, a := range want.AttributeDefinitions {
		wantAttrs = append(wantAttrs, *a.AttributeName+":"+string(a.AttributeType))
	}
	for _, k := range want.KeySchema {
		wantKeys = append(wantKeys, *k.AttributeName+":"+string(k.KeyType))
	}
	wantGSI := map[string]string{}
	for _, g := range want.GlobalSecondaryIndexes {
		var ks []string
		for _, k := range g.KeySchema {
			ks = append(ks, *k.AttributeName+":"+string(k.KeyType))
		}
		wantGSI[*g.IndexName] = strings.Join(ks, ",") + " projection " + string(g.Projection.ProjectionType)
	}
	slices.Sort(wantAttrs)

	tables := 0
	for _, name := range sortedKeys(t.Resources) {
		r := t.Resources[name]
		if r.Type != "AWS::DynamoDB::Table" && r.Type != "AWS::DynamoDB::GlobalTable" {
			continue
		}
		tables++
		var attrs []string
		items, err := t.listProp(r, "AttributeDefinitions", p)
		if err != nil {
			return err
		}
		for _, it := range items {
			m := mapOf(it)
			n, _ := Scalar(m["AttributeName"])
			typ, _ := Scalar(m["AttributeType"])
			attrs = append(attrs, n+":"+typ)
		}
		slices.Sort(attrs)
		if !slices.Equal(attrs, wantAttrs) {
			return broken("%s: AttributeDefinitions %v, want %v", name, attrs, wantAttrs)
		}
		if got := keySchema(r.Properties["KeySchema"]); !slices.Equal(got, wantKeys) {
			return broken("%s: KeySchema %v, want %v", name, got, wantKeys)
		}
		gotGSI := map[string]string{}
		gsis, err := t.listProp(r, "GlobalSecondaryIndexes", p)
		if err != nil {
			return err
		}
		for _, g := range gsis {
			m := mapOf(g)
			n, _ := Scalar(m["IndexName"])
			proj, _ := Scalar(mapOf(m["Projection"])["ProjectionType"])
			gotGSI[n] = strings.Join(keySchema(m["KeySchema"]), ",") + " projection " + proj
		}
		if fmt.Sprint(gotGSI) != fmt.Sprint(wantGSI) {
			return broken("%s: GlobalSecondaryIndexes %v, want %v", name, gotGSI, wantGSI)
		}
		if _, ok := r.Properties["LocalSecondaryIndexes"]; ok {
			return broken("%s: has LocalSecondaryIndexes, the schema has none", name)
		}
		if got, _ := Scalar(r.Properties["BillingMode"]); got != string(want.BillingMode) {
			return broken("%s: BillingMode %q, want %q", name, got, want.BillingMode)
		}
		ttl, _ := Scalar(mapOf(r.Properties["TimeToLiveSpecification"])["AttributeName"])
		if ttl != tableschema.TTLAttribute {
			return broken("%s: TTL attribute %q, want %q", name, ttl, tableschema.TTLAttribute)
		}
	}
	if tables == 0 {
		return broken("no DynamoDB table")
	}
	return nil
}

// listProp evaluates list property name of r with p (Fn::If elements
// resolved, NoValue ones dropped).
func (t *Template) listProp(r *Resource, name string, p Values) ([]any, error) {
	v, err := t.Eval(r.Properties[name], p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	items, _ := v.([]any)
	return items, nil
}

func (t *Template) functionNames() []string {
	var out []string
	for _, name := range sortedKeys(t.Resources) {
		if t.Resources[name].Type == functionType {
			out = append(out, name)
		}
	}
	return out
}

func checkFunctions(t *Template, _ Values) error {
	names := t.functionNames()
	if len(names) == 0 {
		return broken("no functions")
	}
	for _, name := range names {
		fn := t.Resources[name]
		if got, _ := Scalar(t.functionProp(fn, "Runtime")); got != "provided.al2023" {
			return broken("%s: Runtime %q, want provided.al2023", name, got)
		}
		arch, _ := t.functionProp(fn, "Architectures").([]any)
		if len(arch) != 1 || arch[0] != "arm64" {
			return broken("%s: Architectures %v, want [arm64]", name, arch)
		}
		if got, _ := Scalar(t.functionProp(fn, "Handler")); got != "bootstrap" {
			return broken("%s: Handler %q, want bootstrap", name, got)
		}
		if got, _ := Scalar(fn.Metadata["BuildMethod"]); got != "makefile" {
			return broken("%s: Metadata.BuildMethod %q, want makefile", name, got)
		}
		if got, _ := Scalar(mapOf(t.functionProp(fn, "LoggingConfig"))["LogFormat"]); got != "JSON" {
			return broken("%s: LoggingConfig.LogFormat %q, want JSON", name, got)
		}
	}
	return nil
}

func checkOwnRoles(t *Template, _ Values) error {
	owner := map[string]string{}
	for _, name := range t.functionNames() {
		fn := t.Resources[name]
		role, ok := getAttTarget(fn.Properties["Role"], "Arn")
		if !ok {
			return broken("%s: Role is not !GetAtt <a role of this template>.Arn", name)
		}
		if _, err := t.resource(role, "AWS::IAM::Role"); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if other, dup := owner[role]; dup {
			return broken("%s and %s share role %s", other, name, role)
		}
		owner[role] = name
		if _, ok := fn.Properties["Policies"]; ok {
			return broken("%s: Policies are ignored with an explicit Role; put them on %s", name, role)
		}
	}
	return nil
}

// statements returns every policy statement in v, from both branches of any
// Fn::If, so a statement that only some parameter values enable is checked.
func statements(v any) []map[string]any {
	switch x := v.(type) {
	case []any:
		var out []map[string]any
		for _, e := range x {
			out = append(out, statements(e)...)
		}
		return out
	case map[string]any:
		if args, ok := x["Fn::If"].([]any); ok && len(args) == 3 {
			return append(statements(args[1]), statements(args[2])...)
		}
		if _, ok := x["Effect"]; ok {
			return []map[string]any{x}
		}
	}
	return nil
}

// leaves returns the literal strings of v (a string or a list of them,
// through Fn::If branches).
func leaves(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, leaves(e)...)
		}
		return out
	case map[string]any:
		if args, ok := x["Fn::If"].([]any); ok && len(args) == 3 {
			return append(leaves(args[1]), leaves(args[2])...)
		}
	}
	return nil
}

func checkPolicies(t *Template, _ Values) error {
	for _, name := range sortedKeys(t.Resources) {
		r := t.Resources[name]
		var docs []any
		switch r.Type {
		case "AWS::IAM::Role":
			pols, _ := r.Properties["Policies"].([]any)
			for _, p := range pols {
				docs = append(docs, mapOf(mapOf(p)["PolicyDocument"])["Statement"])
			}
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			docs = append(docs, mapOf(r.Properties["PolicyDocument"])["Statement"])
		case functionType:
			pols, _ := r.Properties["Policies"].([]any)
			for _, p := range pols {
				docs = append(docs, mapOf(p)["Statement"])
			}
		default:
			continue
		}
		for _, st := range statements(docs) {
			if eff, _ := st["Effect"].(string); eff != "Allow" {
				continue
			}
			actions := leaves(st["Action"])
			if _, ok := st["NotAction"]; ok {
				return broken("%s: NotAction grants everything else", name)
			}
			dynamo := false
			for _, a := range actions {
				if a == "*" || strings.HasSuffix(a, ":*") {
					return broken("%s: Action %q", name, a)
				}
				if strings.HasPrefix(strings.ToLower(a), "dynamodb:") {
					dynamo = true
				}
			}
			if dynamo && slices.Contains(leaves(st["Resource"]), "*") {
				return broken("%s: DynamoDB actions %v on Resource \"*\"", name, actions)
			}
		}
	}
	return nil
}
