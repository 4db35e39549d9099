package ddbcost

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// Every expected size below is computed by hand from the documented rules,
// shown term by term.
func TestItemSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		item Item
		want int
	}{
		{"Empty", nil, 0},
		{"String", Item{"pk": s("abc")}, 2 + 3},
		{"UTF8String", Item{"név": s("é")}, 4 + 2},
		{"Bool", Item{"ok": &types.AttributeValueMemberBOOL{Value: true}}, 2 + 1},
		{"Null", Item{"x": &types.AttributeValueMemberNULL{Value: true}}, 1 + 1},
		{"Binary", Item{"b": &types.AttributeValueMemberB{Value: []byte{1, 2, 3}}}, 1 + 3},
		{"EmptyMap", Item{"e": &types.AttributeValueMemberM{Value: Item{}}}, 1 + 3},
		// name 1 + overhead 3 + element a (1 + name 1 + "xy" 2) + element b (1 + name 1 + number 7: 1 digit → 1 + 1).
		{"Map", Item{"m": &types.AttributeValueMemberM{Value: Item{"a": s("xy"), "b": n("7")}}}, 1 + 3 + (1 + 1 + 2) + (1 + 1 + 2)},
		// name 1 + overhead 3 + (1 + "ab" 2) + (1 + number 1 → 2).
		{"List", Item{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), n("1")}}}, 1 + 3 + (1 + 2) + (1 + 2)},
		{"StringSet", Item{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bcd"}}}, 2 + 1 + 3},
		// name 2 + 1234 (4 digits → 2 + 1) + 5 (1 digit → 1 + 1).
		{"NumberSet", Item{"ns": &types.AttributeValueMemberNS{Value: []string{"1234", "5"}}}, 2 + 3 + 2},
		{"BinarySet", Item{"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}}, 2 + 1 + 2},
		// A Powertools idempotency record after the handler returned:
		// id "idempotency#" + 32 hex (44), expiration 1764600000 (significant
		// digits 17646: 5 → 3 + 1), status COMPLETED (9),
		// data {"message_id":"msg-1"} (22).
		{"PowertoolsRecord", Item{
			"id":         s("idempotency#0123456789abcdef0123456789abcdef"),
			"expiration": n("1764600000"),
			"status":     s("COMPLETED"),
			"data":       s(`{"message_id":"msg-1"}`),
		}, (2 + 44) + (10 + 4) + (6 + 9) + (4 + 22)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ItemSize(tt.item); got != tt.want {
				t.Errorf("ItemSize = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNumberSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		"0":          1, // no significant digit
		"7":          2, // 1 digit → 1 byte, + 1
		"123":        3, // 3 digits → 2 bytes, + 1
		"1000":       2, // trailing zeroes trimmed: "1"
		"-0.0012":    2, // sign, point and leading zeroes trimmed: "12"
		"12345.678":  5, // 8 digits → 4 bytes, + 1
		"1.5E+3":     2, // the exponent is not a digit: "15"
		"1764600000": 4,
	} {
		if got := NumberSize(in); got != want {
			t.Errorf("NumberSize(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestUnits(t *testing.T) {
	t.Parallel()
	for size, want := range map[int]int{0: 1, 1: 1, 1024: 1, 1025: 2, 20 * 1024: 20, 20*1024 + 1: 21} {
		if got := Units(size); got != want {
			t.Errorf("Units(%d) = %d, want %d", size, got, want)
		}
	}
}

// attention is a table like sendonce's: key pk, one index on
// (attn_pk, attn_sk) projecting all attributes.
var attention = SchemaOf(&types.TableDescription{
	KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	GlobalSecondaryIndexes: []types.GlobalSecondaryIndexDescription{{
		IndexName: aws.String("attention"),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("attn_pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("attn_sk"), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
	}},
})

// row returns a ledger-like row padded to size bytes, in the index when
// sk is not empty.
func row(size int, sk string) Item {
	it := Item{"pk": s("k1"), "state": s("PENDING")}
	if sk != "" {
		it["attn_pk"], it["attn_sk"] = s("attn#01"), s(sk)
	}
	it["pad"] = s(strings.Repeat("x", size-ItemSize(it)-3))
	if ItemSize(it) != size {
		panic("row: size")
	}
	return it
}

func TestCost(t *testing.T) {
	t.Parallel()
	keysOnly := SchemaOf(&types.TableDescription{
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndexDescription{{
			IndexName:  aws.String("attention"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("attn_pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("attn_sk"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	withSent := func(it Item) Item {
		c := Item{}
		for k, v := range it {
			c[k] = v
		}
		c["state"] = s("SENT")
		return c
	}
	tests := []struct {
		name        string
		schema      Schema
		w           Write
		table, idx  int
		indexWrites int
	}{
		{"PutNewIndexed", attention, Write{Op: Put, New: row(500, "t1")}, 1, 1, 1},
		{"PutNewNotIndexed", attention, Write{Op: Put, New: row(500, "")}, 1, 0, 0},
		{"PutNew20KB", attention, Write{Op: Put, New: row(20*1024, "t1")}, 20, 20, 1},
		// The larger of before (1500 B → 2) and after (300 B).
		{"UpdateRemovesIndexEntry", attention, Write{Op: Update, Old: row(1500, "t1"), New: row(300, "")}, 2, 2, 1},
		{"UpdateAddsIndexEntry", attention, Write{Op: Update, Old: row(300, ""), New: row(300, "t2")}, 1, 1, 1},
		{"UpdateMovesIndexKey", attention, Write{Op: Update, Old: row(300, "t1"), New: row(300, "t2")}, 1, 2, 2},
		{"UpdateProjectedAttribute", attention, Write{Op: Update, Old: row(300, "t1"), New: withSent(row(300, "t1"))}, 1, 1, 1},
		{"UpdateOutsideIndex", attention, Write{Op: Update, Old: row(300, ""), New: withSent(row(300, ""))}, 1, 0, 0},
		{"UpdateUnprojectedAttribute", keysOnly, Write{Op: Update, Old: row(300, "t1"), New: withSent(row(300, "t1"))}, 1, 0, 0},
		{"FailedPutNoItem", attention, Write{Op: Put, New: row(300, "t1"), Failed: true}, 1, 0, 0},
		// Failed put over an existing item: the larger of the two (1500 B).
		{"FailedPutExisting", attention, Write{Op: Put, Old: row(1500, ""), New: row(300, "t1"), Failed: true}, 2, 0, 0},
		{"FailedUpdateExisting", attention, Write{Op: Update, Old: row(3000, "t1"), Failed: true}, 3, 0, 0},
		{"DeleteIndexed", attention, Write{Op: Delete, Old: row(2000, "t1")}, 2, 2, 1},
		{"DeleteMissing", attention, Write{Op: Delete}, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.schema.Cost(tt.w)
			if c.Table != tt.table || c.Index != tt.idx || c.IndexWrites != tt.indexWrites {
				t.Errorf("Cost = table %d, index %d (%d entries); want table %d, index %d (%d entries)",
					c.Table, c.Index, c.IndexWrites, tt.table, tt.idx, tt.indexWrites)
			}
			if c.Units() != tt.table+tt.idx {
				t.Errorf("Units = %d, want %d", c.Units(), tt.table+tt.idx)
			}
		})
	}
}

func TestSchemaOfInclude(t *testing.T) {
	t.Parallel()
	sc := SchemaOf(&types.TableDescription{
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndexDescription{{
			IndexName:  aws.String("ix"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"state"}},
		}},
	})
	old := Item{"pk": s("k"), "g": s("1"), "state": s("PENDING"), "body": s(strings.Repeat("b", 2000))}
	e, in := sc.entry(sc.Indexes[0], old)
	// The entry holds pk, g and state only: 2+1 + 1+1 + 5+7.
	if !in || ItemSize(e) != 17 {
		t.Fatalf("entry = %v (in %v), size %d; want pk, g and state, 17 bytes", e, in, ItemSize(e))
	}
	// Changing the unprojected body leaves the entry as it was.
	nw := Item{"pk": s("k"), "g": s("1"), "state": s("PENDING"), "body": s("short")}
	if c := sc.Cost(Write{Op: Update, Old: old, New: nw}); c.IndexWrites != 0 || c.Table != 2 {
		t.Errorf("Cost = %+v, want table 2 and no index write", c)
	}
}

func TestEqualValue(t *testing.T) {
	t.Parallel()
	ss := func(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }
	bs := func(v ...string) types.AttributeValue {
		out := &types.AttributeValueMemberBS{}
		for _, x := range v {
			out.Value = append(out.Value, []byte(x))
		}
		return out
	}
	m := func(k string, v types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: Item{k: v}}
	}
	l := func(v ...types.AttributeValue) types.AttributeValue { return &types.AttributeValueMemberL{Value: v} }
	tests := []struct {
		name string
		a, b types.AttributeValue
		want bool
	}{
		{"SameString", s("a"), s("a"), true},
		{"OtherString", s("a"), s("b"), false},
		{"OtherType", s("1"), &types.AttributeValueMemberN{Value: "1"}, false},
		{"SetInAnyOrder", ss("a", "b"), ss("b", "a"), true},
		{"OtherSet", ss("a", "b"), ss("a", "c"), false},
		{"BinarySetInAnyOrder", bs("x", "y"), bs("y", "x"), true},
		{"SetInAMap", m("k", ss("a", "b")), m("k", ss("b", "a")), true},
		{"OtherMap", m("k", s("a")), m("j", s("a")), false},
		{"ListInOrder", l(s("a"), ss("p", "q")), l(s("a"), ss("q", "p")), true},
		{"ListOutOfOrder", l(s("a"), s("b")), l(s("b"), s("a")), false},
		{"Bool", &types.AttributeValueMemberBOOL{Value: true}, &types.AttributeValueMemberBOOL{Value: false}, false},
		{"Null", &types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberNULL{Value: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := equalValue(tt.a, tt.b); got != tt.want {
				t.Errorf("equalValue(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}
