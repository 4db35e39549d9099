package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/testenv"
)

// dynamoClient returns a client for DynamoDB Local at endpoint, built as
// the functions build theirs (lambdaenv.DynamoDB), with the extra options.
func dynamoClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	cfg := testenv.Config()
	cfg.BaseEndpoint = aws.String(endpoint)
	c := lambdaenv.DynamoDB(cfg, func(v string) string {
		if v == "AWS_ENDPOINT_URL_DYNAMODB" {
			return endpoint
		}
		return ""
	})
	if len(optFns) == 0 {
		return c
	}
	return dynamodb.New(c.Options(), optFns...)
}

// createTable creates a fresh table with the production schema (the
// default, or as opts say: tableschema.WithEventIndex) and TTL and returns
// its name and a function that deletes it, to call even on an error (the
// table may exist without its TTL).
func createTable(ctx context.Context, db *dynamodb.Client, purpose string, opts ...tableschema.Option) (string, func(), error) {
	name := "sendonce-bench-" + purpose + "-" + testenv.RandomID()
	return name, dropTable(db, name), testenv.CreateTable(ctx, db, name, opts...)
}

// createPlainTable creates an on-demand table keyed by the string key
// attribute, with TTL on ttl when not empty; the rest as createTable.
func createPlainTable(ctx context.Context, db *dynamodb.Client, purpose, key, ttl string) (string, func(), error) {
	name := "sendonce-bench-" + purpose + "-" + testenv.RandomID()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
	})
	if err == nil && ttl != "" {
		_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttl), Enabled: aws.Bool(true)},
		})
	}
	if err != nil {
		err = fmt.Errorf("create table %s: %w", name, err)
	}
	return name, dropTable(db, name), err
}

// dropTable returns a function that deletes table name, if it exists.
func dropTable(db *dynamodb.Client, name string) func() {
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
}
