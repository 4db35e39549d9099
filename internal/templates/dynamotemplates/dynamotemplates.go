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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/templates"
)

// Prefix starts the partition key of every template item.
const Prefix = "tpl#"

// Attribute names.
const (
	attrPK        = tableschema.PartitionKey
	attrTenant    = "tenant"
	attrName      = "name"
	attrChannel   = "channel"
	attrLocale    = "locale"
	attrVersion   = "version"
	attrSubject   = "subject"
	attrText      = "text"
	attrHTML      = "html"
	attrCreatedAt = "created_at"
	attrIDs       = "ids"
)

// maxPutAttempts bounds Put's retries under contention on one ID.
const maxPutAttempts = 8

// API is the part of *dynamodb.Client the store uses.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Store is the DynamoDB templates.Store. It is safe for concurrent use.
type Store struct {
	db    API
	table string
	now   func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithNow sets the clock (default time.Now).
func WithNow(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns a Store on table through db.
func New(db API, table string, opts ...Option) *Store {
	s := &Store{db: db, table: table, now: time.Now}
	for _, o := range opts {
		o(s)
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
		head := item(headKey(t.ID), t)
		headPut := &types.Put{TableName: aws.String(s.table), Item: head, ExpressionAttributeNames: map[string]string{"#pk": attrPK}}
		if prev == 0 {
			headPut.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		} else {
			headPut.ConditionExpression = aws.String("#v = :prev")
			headPut.ExpressionAttributeNames = map[string]string{"#v": attrVersion}
			headPut.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": num(prev)}
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: headPut},
			{Put: &types.Put{
				TableName: aws.String(s.table), Item: item(versionKey(t.ID, t.Version), t),
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}},
			{Update: &types.Update{
				TableName: aws.String(s.table), Key: tableschema.Key(indexKey(t.Tenant)),
				UpdateExpression:          aws.String("ADD #ids :id SET #tenant = :tenant"),
				ExpressionAttributeNames:  map[string]string{"#ids": attrIDs, "#tenant": attrTenant},
				ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberSS{Value: []string{indexID(t.ID)}}, ":tenant": str(t.Tenant)},
			}},
		}})
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
	return decode(out.Item)
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
	ss, _ := idx.Item[attrIDs].(*types.AttributeValueMemberSS)
	if ss == nil {
		return out, nil
	}
	pks := make([]string, 0, len(ss.Value))
	for _, v := range ss.Value {
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
		for _, it := range out.Responses[s.table] {
			t, err := decode(it)
			if err != nil {
				return nil, err
			}
			found[sAttr(it, attrPK)] = t
		}
		req = out.UnprocessedKeys
	}
	return found, nil
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(n)} }

func indexID(id templates.ID) string { return id.Name + "#" + id.Channel + "#" + id.Locale }

func item(pk string, t templates.Template) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		attrPK: str(pk), attrTenant: str(t.Tenant), attrName: str(t.Name), attrChannel: str(t.Channel),
		attrVersion: num(t.Version), attrText: str(t.Text),
		attrCreatedAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(t.CreatedAt.UnixMilli(), 10)},
	}
	for name, v := range map[string]string{attrLocale: t.Locale, attrSubject: t.Subject, attrHTML: t.HTML} {
		if v != "" {
			it[name] = str(v)
		}
	}
	return it
}

func sAttr(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func nAttr(it map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("template item %s: attribute %s is missing or not a number", sAttr(it, attrPK), name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("template item %s: attribute %s: %w", sAttr(it, attrPK), name, err)
	}
	return n, nil
}

func decode(it map[string]types.AttributeValue) (templates.Template, error) {
	t := templates.Template{
		ID: templates.ID{
			Tenant: sAttr(it, attrTenant), Name: sAttr(it, attrName),
			Channel: sAttr(it, attrChannel), Locale: sAttr(it, attrLocale),
		},
		Subject: sAttr(it, attrSubject), Text: sAttr(it, attrText), HTML: sAttr(it, attrHTML),
	}
	v, err := nAttr(it, attrVersion)
	if err != nil {
		return templates.Template{}, err
	}
	t.Version = int(v)
	ms, err := nAttr(it, attrCreatedAt)
	if err != nil {
		return templates.Template{}, err
	}
	t.CreatedAt = time.UnixMilli(ms).UTC()
	return t, nil
}
