// Package ddbcost computes what real DynamoDB charges for a write, from
// the items before and after it, following the documented rules. DynamoDB
// Local reports consumed capacity for successful writes only (a failed
// conditional write reports none, though DynamoDB charges it), so the
// benchmarks compute the real figure beside the reported one.
//
// Item size (Amazon DynamoDB Developer Guide, "DynamoDB item sizes and
// formats"): the sum over attributes of the UTF-8 length of the name plus
// the value's size, where
//
//   - a string is its UTF-8 length; a binary value its raw length;
//   - a number is 1 byte per two significant digits plus 1 byte (leading
//     and trailing zeroes trimmed; the documented approximation);
//   - a Boolean or null is 1 byte;
//   - a list or map is 3 bytes plus, per element, 1 byte and the element's
//     size (a map element's size includes its name);
//   - a set is the sum of its elements' sizes.
//
// Write units ("DynamoDB read and write operations", "Condition
// expressions", "Global secondary indexes: provisioned throughput"):
//
//   - PutItem, UpdateItem and DeleteItem cost 1 unit per started KB of the
//     item: the larger of the item before and after for PutItem and
//     UpdateItem, the deleted item for DeleteItem; at least 1.
//   - A conditional write whose condition fails still costs: 1 unit when
//     no item exists, else by the item's size (for PutItem the larger of
//     the existing and the new item, as for a successful put).
//   - Each global secondary index costs per index entry written or
//     removed, 1 unit per started KB of the entry: a new entry is one
//     write, a removed entry one, a changed index key two (remove and
//     put), a changed projection one; an item outside the index before
//     and after costs nothing there. An entry holds the table's key, the
//     index's key and the projected attributes.
package ddbcost

import (
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item is an item as the SDK represents it.
type Item = map[string]types.AttributeValue

// ItemSize returns item's size in bytes by the documented rules (package
// doc). A nil or empty item has size 0.
func ItemSize(item Item) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize returns the size of one attribute value, without its name.
func ValueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sum(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sum(v.Value, NumberSize)
	case *types.AttributeValueMemberBS:
		return sum(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + ValueSize(e)
		}
		return n
	}
	return 0
}

// sum adds up the sizes of a set's elements.
func sum[T any](set []T, size func(T) int) int {
	n := 0
	for _, e := range set {
		n += size(e)
	}
	return n
}

// NumberSize returns the size of a number given as DynamoDB's decimal
// text: 1 byte per two significant digits, rounded up, plus 1 byte. The
// sign, the decimal point, an exponent and leading and trailing zeroes do
// not count as digits.
func NumberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Replace(s, ".", "", 1)
	s = strings.Trim(s, "0")
	return (len(s)+1)/2 + 1
}

// Units returns the write units of size bytes: 1 per started KB, at
// least 1.
func Units(size int) int {
	return max(1, int(math.Ceil(float64(size)/1024)))
}

// Index describes a global secondary index.
type Index struct {
	Name string
	// Keys are the index's key attributes (partition, then sort).
	Keys []string
	// Projection is ALL, KEYS_ONLY or INCLUDE.
	Projection types.ProjectionType
	// NonKey lists the attributes an INCLUDE projection adds.
	NonKey []string
}

// Schema is what the costing needs to know about a table.
type Schema struct {
	// Keys are the table's key attributes.
	Keys    []string
	Indexes []Index
}

// SchemaOf reads a Schema from a DescribeTable answer.
func SchemaOf(t *types.TableDescription) Schema {
	var s Schema
	for _, k := range t.KeySchema {
		s.Keys = append(s.Keys, aws.ToString(k.AttributeName))
	}
	for _, g := range t.GlobalSecondaryIndexes {
		ix := Index{Name: aws.ToString(g.IndexName), Projection: types.ProjectionTypeAll}
		for _, k := range g.KeySchema {
			ix.Keys = append(ix.Keys, aws.ToString(k.AttributeName))
		}
		if g.Projection != nil {
			ix.Projection = g.Projection.ProjectionType
			ix.NonKey = g.Projection.NonKeyAttributes
		}
		s.Indexes = append(s.Indexes, ix)
	}
	return s
}

// Op is a write operation.
type Op string

// The write operations costed.
const (
	Put    Op = "PutItem"
	Update Op = "UpdateItem"
	Delete Op = "DeleteItem"
)

// Write is one write call as the table saw it.
type Write struct {
	Op Op
	// Old is the item before the call (nil when there was none).
	Old Item
	// New is the item after a successful call (nil after a delete); for
	// a failed PutItem, the item the call tried to write.
	New Item
	// Failed says the condition failed: nothing was written.
	Failed bool
}

// Cost is what a write costs on real DynamoDB.
type Cost struct {
	// Table is the table's write units.
	Table int
	// Index is the write units of every index together; IndexWrites
	// counts the index entries written or removed.
	Index, IndexWrites int
}

// Units is the write's total: table and indexes.
func (c Cost) Units() int { return c.Table + c.Index }

// Cost applies the documented rules (package doc) to w.
func (s Schema) Cost(w Write) Cost {
	var c Cost
	switch {
	case w.Failed && w.Old == nil:
		c.Table = 1
	case w.Failed && w.Op == Put:
		c.Table = Units(max(ItemSize(w.Old), ItemSize(w.New)))
	case w.Failed, w.Op == Delete:
		c.Table = Units(ItemSize(w.Old))
	default:
		c.Table = Units(max(ItemSize(w.Old), ItemSize(w.New)))
	}
	if w.Failed {
		return c
	}
	for _, ix := range s.Indexes {
		before, inBefore := s.entry(ix, w.Old)
		after, inAfter := s.entry(ix, w.New)
		units, writes := 0, 0
		switch {
		case inBefore && inAfter && !sameValues(before, after, ix.Keys):
			units, writes = Units(ItemSize(before))+Units(ItemSize(after)), 2
		case inBefore && inAfter && !sameValues(before, after, nil):
			units, writes = Units(max(ItemSize(before), ItemSize(after))), 1
		case inBefore && !inAfter:
			units, writes = Units(ItemSize(before)), 1
		case !inBefore && inAfter:
			units, writes = Units(ItemSize(after)), 1
		}
		c.Index += units
		c.IndexWrites += writes
	}
	return c
}

// entry returns item's entry in ix, and whether item is in ix at all (it
// holds every key attribute of the index).
func (s Schema) entry(ix Index, item Item) (Item, bool) {
	if item == nil {
		return nil, false
	}
	for _, k := range ix.Keys {
		if _, ok := item[k]; !ok {
			return nil, false
		}
	}
	if ix.Projection == types.ProjectionTypeAll {
		return item, true
	}
	e := Item{}
	for _, names := range [][]string{s.Keys, ix.Keys, ix.NonKey} {
		for _, k := range names {
			if v, ok := item[k]; ok {
				e[k] = v
			}
		}
	}
	return e, true
}

// sameValues reports whether a and b hold equal values for names, or for
// every attribute when names is nil.
func sameValues(a, b Item, names []string) bool {
	if names == nil {
		if len(a) != len(b) {
			return false
		}
		for k := range a {
			names = append(names, k)
		}
	}
	for _, k := range names {
		va, oka := a[k]
		vb, okb := b[k]
		if oka != okb || (oka && !equalValue(va, vb)) {
			return false
		}
	}
	return true
}

// equalValue reports whether two values are equal; sets compare as sets,
// in any order, and so do the sets inside lists and maps.
func equalValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, equalValue)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && sameValues(a.Value, b.Value, nil)
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value)
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(byteStrings(a.Value), byteStrings(b.Value))
	}
	return reflect.DeepEqual(a, b)
}

func byteStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// sameSet reports whether two sets hold the same elements, in any order.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
