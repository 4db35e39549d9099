package apikey

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/tableschema"
)

// Info is what List tells about a key: never its secret or its hash.
type Info struct {
	ID        string
	Tenant    string
	CreatedAt time.Time
	Revoked   bool
	// RevokedAt is zero unless the key was revoked.
	RevokedAt time.Time
}

// QueryAPI is what List needs beyond DynamoDB; *dynamodb.Client has it.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

func listPK(tenant string) string { return "#apikey#" + tenant }

// List returns tenant's keys, oldest first: one Query of the event index
// (every page) and one strongly consistent GetItem per key. It returns
// ErrInvalidTenant for a malformed tenant, or a wrapped storage error (also
// when the client cannot Query).
func (s *Store) List(ctx context.Context, tenant string) ([]Info, error) {
	if !tenantRE.MatchString(tenant) {
		return nil, fmt.Errorf("apikey: list: %w", ErrInvalidTenant)
	}
	q, ok := s.db.(QueryAPI)
	if !ok {
		return nil, fmt.Errorf("apikey: list: client %T cannot Query", s.db)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(tableschema.EventIndex),
		KeyConditionExpression:    aws.String("#e = :e"),
		ExpressionAttributeNames:  map[string]string{"#e": tableschema.EventPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": &types.AttributeValueMemberS{Value: listPK(tenant)}},
	}
	var infos []Info
	for {
		out, err := q.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("apikey: list keys of tenant %s: %w", tenant, err)
		}
		for _, k := range out.Items {
			pk, _ := k[tableschema.PartitionKey].(*types.AttributeValueMemberS)
			if pk == nil || !strings.HasPrefix(pk.Value, pkPrefix) {
				continue
			}
			info, err := s.info(ctx, pk.Value)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if info.Tenant == tenant {
				infos = append(infos, info)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	sort.Slice(infos, func(i, j int) bool {
		if !infos[i].CreatedAt.Equal(infos[j].CreatedAt) {
			return infos[i].CreatedAt.Before(infos[j].CreatedAt)
		}
		return infos[i].ID < infos[j].ID
	})
	return infos, nil
}

func (s *Store) info(ctx context.Context, pk string) (Info, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            aws.String(s.table),
		Key:                  map[string]types.AttributeValue{tableschema.PartitionKey: &types.AttributeValueMemberS{Value: pk}},
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("#pk, #t, #c, #r, #ra"),
		ExpressionAttributeNames: map[string]string{
			"#pk": tableschema.PartitionKey, "#t": attrTenant, "#c": attrCreatedAt, "#r": attrRevoked, "#ra": attrRevokedAt,
		},
	})
	if err != nil {
		return Info{}, fmt.Errorf("apikey: list: read %s: %w", pk, err)
	}
	if out.Item == nil {
		return Info{}, ErrNotFound
	}
	str := func(name string) string {
		v, _ := out.Item[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	info := Info{ID: strings.TrimPrefix(pk, pkPrefix), Tenant: str(attrTenant)}
	info.CreatedAt, _ = time.Parse(time.RFC3339, str(attrCreatedAt))
	info.RevokedAt, _ = time.Parse(time.RFC3339, str(attrRevokedAt))
	if r, ok := out.Item[attrRevoked].(*types.AttributeValueMemberBOOL); ok {
		info.Revoked = r.Value
	}
	return info, nil
}
