package dynamoledger

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/ledger"
)

// decode turns a stored item into a Record. It reads the attributes
// directly: absent attributes stay zero; an attribute of the wrong type or
// an unparsable number is an error naming it.
func decode(item map[string]types.AttributeValue) (ledger.Record, error) {
	var (
		r   ledger.Record
		err error
	)
	r.Key = sAttr(item, attrPK)
	r.Tenant = sAttr(item, attrTenant)
	r.Channel = sAttr(item, attrChannel)
	r.Class = sAttr(item, attrClass)
	r.Provider = sAttr(item, attrProvider)
	r.Template = sAttr(item, attrTemplate)
	r.RecipientID = sAttr(item, attrRecipientID)
	r.Address = sAttr(item, attrAddress)
	r.Subject = sAttr(item, attrSubject)
	r.Body = sAttr(item, attrBody)
	r.HTML = sAttr(item, attrHTML)
	r.Data = sAttr(item, attrData)
	r.TemplateLocale = sAttr(item, attrTplLocale)
	r.Trace = sAttr(item, attrTrace)
	r.State = ledger.State(sAttr(item, attrState))
	r.ClaimID = sAttr(item, attrClaimID)
	r.ProviderMessageID = sAttr(item, attrProviderMsg)
	r.Reason = sAttr(item, attrReason)
	r.DeliveryStatus = sAttr(item, attrDlvStatus)
	decodeAdmin(item, &r) // event id and resolution audit (admin.go)
	if l, ok := item[attrHistory].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			s, ok := v.(*types.AttributeValueMemberS)
			if !ok {
				return r, fmt.Errorf("dynamoledger: attribute %s: an entry is not a string", attrHistory)
			}
			r.History = append(r.History, s.Value)
		}
	}
	if b, ok := item[attrReleased].(*types.AttributeValueMemberBOOL); ok {
		r.Released = b.Value
	}

	var n int64
	for _, f := range [...]struct {
		name string
		n    *int
	}{
		{attrAttempts, &r.Attempts}, {attrReleases, &r.Releases}, {attrDlvRank, &r.DeliveryRank}, {attrTplVersion, &r.TemplateVersion},
	} {
		if n, err = intAttr(item, f.name); err != nil {
			return r, err
		}
		*f.n = int(n)
	}
	for _, f := range [...]struct {
		name string
		t    *time.Time
	}{
		{attrLeaseUntil, &r.LeaseUntil}, {attrAttemptedAt, &r.AttemptedAt}, {attrCreatedAt, &r.CreatedAt},
		{attrUpdatedAt, &r.UpdatedAt}, {attrDlvAt, &r.DeliveryAt}, {attrRetryAt, &r.RetryAt},
		{attrLookupFrom, &r.LookupFrom}, {attrValidUntil, &r.ValidUntil},
		{attrResolvedAt, &r.ResolvedAt},
	} {
		if _, ok := item[f.name]; !ok {
			continue
		}
		if n, err = intAttr(item, f.name); err != nil {
			return r, err
		}
		*f.t = time.UnixMilli(n).UTC()
	}
	if _, ok := item[attrExpiresAt]; ok {
		if n, err = intAttr(item, attrExpiresAt); err != nil {
			return r, err
		}
		r.ExpiresAt = time.Unix(n, 0).UTC()
	}
	return r, nil
}

// sAttr returns item's string attribute name, or "" when it is absent or
// not a string.
func sAttr(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// intAttr returns item's number attribute name as an integer, 0 when it is
// absent, or an error when it is not an integer number.
func intAttr(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name]
	if !ok {
		return 0, nil
	}
	nv, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("decode: attribute %s: type %T, want a number", name, v)
	}
	n, err := strconv.ParseInt(nv.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decode: attribute %s: %w", name, err)
	}
	return n, nil
}

// strList encodes ss as a DynamoDB list of strings, in order.
func strList(ss []string) types.AttributeValue {
	l := &types.AttributeValueMemberL{Value: make([]types.AttributeValue, len(ss))}
	for i, s := range ss {
		l.Value[i] = str(s)
	}
	return l
}
