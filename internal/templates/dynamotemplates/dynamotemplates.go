// Package dynamotemplates is the templates.Store in the one sendonce
// table (package tableschema), under the partition-key prefix "tpl#".
//
// # Items
//
//	tpl#<tenant>                                    the tenant's index: a string set "ids" of
//	                                                "<name>#<channel>#<locale>", one per template
//	tpl#<tenant>#<name>#<channel>#<locale>          head: the latest version, in full
//	tpl#<tenant>#<name>#<channel>#<locale>#v<N>     version N, immutable
//
// <locale> is empty for the default ("tpl#acme#otp#sms#"). '#' occurs in
// none of the parts (their rules forbid it), so the keys are unambiguous.
// Template items carry no TTL attribute: they live until deleted.
//
// # Writes
//
// Put reads the head (strongly consistent) and writes, in one
// transaction, the new head conditional on the version it read, the new
// version item conditional on its absence, and the tenant index. A
// concurrent put of the same ID fails the head's condition and Put tries
// again from the new head, so versions are consecutive and never reused.
//
// # Reads
//
// Get is one GetItem of the head or the version item; Resolve one
// BatchGetItem of the candidate heads; List one GetItem of the index and
// BatchGetItem of its heads, 100 at a time. Reads are strongly
// consistent, so a put is visible to the next read.
package dynamotemplates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/templates"
)

// Prefix starts the partition key of every template item.
const Prefix = "tpl#"

// maxPutAttempts bounds Put's retries under contention on one ID.
const maxPutAttempts = 8

// API is the part of *dynamodb.Client the store uses.
type API interface {
	tableschema.GetAPI
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Store is the DynamoDB templates.Store. It is safe for concurrent use.
type Store struct {
	db    API
	table string
	now   func() time.Time
}

// Config configures a Store. The zero value is the production setting.
type Config struct {
	// Now is the clock of the versions' creation times; nil means
	// time.Now.
	Now func() time.Time
}

// New returns a Store on table through db.
func New(db API, table string, cfg Config) *Store {
	s := &Store{db: db, table: table, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

func indexKey(tenant string) string { return Prefix + tenant }

func headKey(id templates.ID) string {
	return Prefix + id.Tenant + "#" + id.Name + "#" + id.Channel + "#" + id.Locale
}

func versionKey(id templates.ID, v int) string { return headKey(id) + "#v" + strconv.Itoa(v) }

// Put implements templates.Store.
func (s *Store) Put(ctx context.Context, t templates.Template) (templates.Template, error) {
	if err := templates.Validate(t); err != nil {
		return templates.Template{}, fmt.Errorf("dynamotemplates: put %s: %w", t.ID, err)
	}
	for range maxPutAttempts {
		cur, err := s.get(ctx, headKey(t.ID))
		var prev int
		switch {
		case err == nil:
			prev = cur.Version
		case !errors.Is(err, templates.ErrNotFound):
			return templates.Template{}, fmt.Errorf("dynamotemplates: put %s: %w", t.ID, err)
		}
		t.Version = prev + 1
		t.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
		cond := expression.AttributeNotExists(expression.Name(tableschema.PartitionKey))
		if prev > 0 {
			cond = expression.Name("version").Equal(expression.Value(prev))
		}
		in, err := s.putWrites(t, cond)
		if err != nil {
			return templates.Template{}, fmt.Errorf("dynamotemplates: put %s: %w", t.ID, err)
		}
		_, err = s.db.TransactWriteItems(ctx, in)
		if err == nil {
			return t, nil
		}
		if !conflict(err) {
			return templates.Template{}, fmt.Errorf("dynamotemplates: put %s: %w", t.ID, err)
		}
		// Another put of the same ID won the race (or the transaction
		// collided with one): read the new head and try again.
	}
	return templates.Template{}, fmt.Errorf("dynamotemplates: put %s: %d concurrent puts collided; try again", t.ID, maxPutAttempts)
}

// putWrites returns the transaction that puts t: its head if cond holds
// (the head's version is the one read), its version item if absent, and
// its ID in the tenant's index.
func (s *Store) putWrites(t templates.Template, cond expression.ConditionBuilder) (*dynamodb.TransactWriteItemsInput, error) {
	head, err := s.put(headKey(t.ID), t, cond)
	if err != nil {
		return nil, err
	}
	version, err := s.put(versionKey(t.ID, t.Version), t, expression.AttributeNotExists(expression.Name(tableschema.PartitionKey)))
	if err != nil {
		return nil, err
	}
	// ADD to a string set: a Go []string encodes as a list, so the set is
	// given as the attribute value it is.
	expr, err := expression.NewBuilder().WithUpdate(
		expression.Add(expression.Name("ids"), expression.Value(&types.AttributeValueMemberSS{Value: []string{indexID(t.ID)}})).
			Set(expression.Name("tenant"), expression.Value(t.Tenant))).Build()
	if err != nil {
		return nil, err
	}
	index := &types.Update{
		TableName: aws.String(s.table), Key: tableschema.Key(indexKey(t.Tenant)), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: head}, {Put: version}, {Update: index}}}, nil
}

// put is the transaction's put of t's item under pk if cond holds.
func (s *Store) put(pk string, t templates.Template, cond expression.ConditionBuilder) (*types.Put, error) {
	in, err := tableschema.PutIf(s.table, newItem(pk, t), cond)
	if err != nil {
		return nil, err
	}
	return &types.Put{
		TableName: in.TableName, Item: in.Item, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
	}, nil
}

// conflict reports whether a transaction was cancelled by a failed
// condition or a conflicting transaction.
func conflict(err error) bool {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		var tce *types.TransactionConflictException
		return errors.As(err, &tce)
	}
	for _, r := range tc.CancellationReasons {
		if c := aws.ToString(r.Code); c == "ConditionalCheckFailed" || c == "TransactionConflict" {
			return true
		}
	}
	return false
}

// Get implements templates.Store.
func (s *Store) Get(ctx context.Context, id templates.ID, version int) (templates.Template, error) {
	pk := headKey(id)
	if version > 0 {
		pk = versionKey(id, version)
	}
	if version < 0 || templates.ValidateID(id) != nil {
		return templates.Template{}, fmt.Errorf("dynamotemplates: get %s v%d: %w", id, version, templates.ErrNotFound)
	}
	t, err := s.get(ctx, pk)
	if err != nil {
		return templates.Template{}, fmt.Errorf("dynamotemplates: get %s v%d: %w", id, version, err)
	}
	return t, nil
}

func (s *Store) get(ctx context.Context, pk string) (templates.Template, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: tableschema.Key(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return templates.Template{}, err
	}
	if out.Item == nil {
		return templates.Template{}, templates.ErrNotFound
	}
	it, err := decode(out.Item)
	if err != nil {
		return templates.Template{}, err
	}
	return it.template(), nil
}

// Resolve implements templates.Store.
func (s *Store) Resolve(ctx context.Context, tenant, name, channel string, locales []string) (templates.Template, error) {
	var pks []string
	for _, l := range locales {
		id := templates.ID{Tenant: tenant, Name: name, Channel: channel, Locale: l}
		if templates.ValidateID(id) == nil && !slices.Contains(pks, headKey(id)) {
			pks = append(pks, headKey(id))
		}
	}
	found, err := s.batchGet(ctx, pks)
	if err != nil {
		return templates.Template{}, fmt.Errorf("dynamotemplates: resolve %s/%s/%s: %w", tenant, name, channel, err)
	}
	for _, pk := range pks {
		if t, ok := found[pk]; ok {
			return t, nil
		}
	}
	return templates.Template{}, fmt.Errorf("dynamotemplates: resolve %s/%s/%s: %w", tenant, name, channel, templates.ErrNotFound)
}

// List implements templates.Store.
func (s *Store) List(ctx context.Context, tenant string) ([]templates.Template, error) {
	out := []templates.Template{}
	if templates.ValidateID(templates.ID{Tenant: tenant, Name: "x", Channel: "sms"}) != nil {
		return out, nil
	}
	idx, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: tableschema.Key(indexKey(tenant)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("dynamotemplates: list %s: %w", tenant, err)
	}
	var index struct {
		IDs []string `dynamodbav:"ids,stringset"`
	}
	if err := attributevalue.UnmarshalMap(idx.Item, &index); err != nil {
		return nil, fmt.Errorf("dynamotemplates: list %s: decode index: %w", tenant, err)
	}
	pks := make([]string, 0, len(index.IDs))
	for _, v := range index.IDs {
		parts := strings.Split(v, "#")
		if len(parts) != 3 {
			return nil, fmt.Errorf("dynamotemplates: list %s: malformed index entry %q", tenant, v)
		}
		pks = append(pks, headKey(templates.ID{Tenant: tenant, Name: parts[0], Channel: parts[1], Locale: parts[2]}))
	}
	for chunk := range slices.Chunk(pks, 100) {
		found, err := s.batchGet(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("dynamotemplates: list %s: %w", tenant, err)
		}
		for _, t := range found {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b templates.Template) int {
		if templates.Less(a.ID, b.ID) {
			return -1
		}
		return 1
	})
	return out, nil
}

// batchGet reads up to 100 items by pk, retrying unprocessed keys, and
// returns those that exist.
func (s *Store) batchGet(ctx context.Context, pks []string) (map[string]templates.Template, error) {
	found := make(map[string]templates.Template, len(pks))
	if len(pks) == 0 {
		return found, nil
	}
	keys := make([]map[string]types.AttributeValue, 0, len(pks))
	for _, pk := range pks {
		keys = append(keys, tableschema.Key(pk))
	}
	req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			}
		}
		if attempt == 10 {
			return nil, errors.New("BatchGetItem left keys unprocessed 10 times")
		}
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, err
		}
		for _, av := range out.Responses[s.table] {
			it, err := decode(av)
			if err != nil {
				return nil, err
			}
			found[it.PK] = it.template()
		}
		req = out.UnprocessedKeys
	}
	return found, nil
}

func indexID(id templates.ID) string { return id.Name + "#" + id.Channel + "#" + id.Locale }

// item is a template (head or version) as stored.
type item struct {
	PK        string `dynamodbav:"pk"`
	Tenant    string `dynamodbav:"tenant"`
	Name      string `dynamodbav:"name"`
	Channel   string `dynamodbav:"channel"`
	Locale    string `dynamodbav:"locale,omitempty"`
	Version   int    `dynamodbav:"version"`
	Subject   string `dynamodbav:"subject,omitempty"`
	Text      string `dynamodbav:"text"`
	HTML      string `dynamodbav:"html,omitempty"`
	CreatedAt int64  `dynamodbav:"created_at"` // Unix ms
}

func newItem(pk string, t templates.Template) item {
	return item{
		PK: pk, Tenant: t.Tenant, Name: t.Name, Channel: t.Channel, Locale: t.Locale, Version: t.Version,
		Subject: t.Subject, Text: t.Text, HTML: t.HTML, CreatedAt: t.CreatedAt.UnixMilli(),
	}
}

func (it item) template() templates.Template {
	return templates.Template{
		ID:      templates.ID{Tenant: it.Tenant, Name: it.Name, Channel: it.Channel, Locale: it.Locale},
		Version: it.Version, Subject: it.Subject, Text: it.Text, HTML: it.HTML,
		CreatedAt: time.UnixMilli(it.CreatedAt).UTC(),
	}
}

// decode returns the item av encodes; its version and creation time must
// be there.
func decode(av map[string]types.AttributeValue) (item, error) {
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return item{}, fmt.Errorf("template item: %w", err)
	}
	for _, name := range []string{"version", "created_at"} {
		if _, ok := av[name]; !ok {
			return item{}, fmt.Errorf("template item %s: attribute %s is missing", it.PK, name)
		}
	}
	return it, nil
}
