package ddbfront

import (
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/benchreport/ddbcost"
)

// wireValue is an AttributeValue in DynamoDB's JSON protocol (one field
// set).
type wireValue struct {
	S    *string              `json:"S,omitempty"`
	N    *string              `json:"N,omitempty"`
	B    []byte               `json:"B,omitempty"`
	BOOL *bool                `json:"BOOL,omitempty"`
	NULL *bool                `json:"NULL,omitempty"`
	SS   []string             `json:"SS,omitempty"`
	NS   []string             `json:"NS,omitempty"`
	BS   [][]byte             `json:"BS,omitempty"`
	L    []wireValue          `json:"L,omitempty"`
	M    map[string]wireValue `json:"M,omitempty"`
}

func (w wireValue) value() types.AttributeValue {
	switch {
	case w.S != nil:
		return &types.AttributeValueMemberS{Value: *w.S}
	case w.N != nil:
		return &types.AttributeValueMemberN{Value: *w.N}
	case w.B != nil:
		return &types.AttributeValueMemberB{Value: w.B}
	case w.BOOL != nil:
		return &types.AttributeValueMemberBOOL{Value: *w.BOOL}
	case w.NULL != nil:
		return &types.AttributeValueMemberNULL{Value: *w.NULL}
	case w.SS != nil:
		return &types.AttributeValueMemberSS{Value: w.SS}
	case w.NS != nil:
		return &types.AttributeValueMemberNS{Value: w.NS}
	case w.BS != nil:
		return &types.AttributeValueMemberBS{Value: w.BS}
	case w.L != nil:
		l := make([]types.AttributeValue, len(w.L))
		for i, e := range w.L {
			l[i] = e.value()
		}
		return &types.AttributeValueMemberL{Value: l}
	case w.M != nil:
		return &types.AttributeValueMemberM{Value: wireItem(w.M)}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}

func wireItem(m map[string]wireValue) ddbcost.Item {
	if m == nil {
		return nil
	}
	it := make(ddbcost.Item, len(m))
	for k, v := range m {
		it[k] = v.value()
	}
	return it
}

// keyString is a stable text of a key's values, for the per-item lock.
func keyString(key ddbcost.Item) string {
	names := make([]string, 0, len(key))
	for k := range key {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k + "=")
		switch v := key[k].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N:" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString("B:" + string(v.Value))
		}
		b.WriteByte(0)
	}
	return b.String()
}
