package main

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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
// its name and a function that deletes it.
func createTable(ctx context.Context, db *dynamodb.Client, purpose string, opts ...tableschema.Option) (string, func(), error) {
	name := "sendonce-bench-" + purpose + "-" + testenv.RandomID()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
	if err := testenv.CreateTable(ctx, db, name, opts...); err != nil {
		drop() // the table may exist without its TTL
		return "", nil, err
	}
	return name, drop, nil
}
