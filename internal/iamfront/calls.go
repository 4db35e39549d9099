package iamfront

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Request is what the front knows of one API request.
type Request struct {
	// Service is the SigV4 signing name of the credential scope
	// ("dynamodb", "sqs", "sns", "ssm", "secretsmanager", "ses",
	// "lambda").
	Service string
	Region  string
	Header  http.Header
	Method  string
	Path    string
	Body    []byte
}

// Operation names the request's API operation ("GetItem", "Publish").
func (r Request) Operation() string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		_, op, _ := strings.Cut(t, ".")
		return op
	}
	if form, err := url.ParseQuery(string(r.Body)); err == nil && form.Get("Action") != "" {
		return form.Get("Action")
	}
	switch {
	case r.Service == "ses" && strings.HasSuffix(r.Path, "/outbound-emails"):
		return "SendEmail"
	case r.Service == "lambda" && strings.HasSuffix(r.Path, "/invocations"):
		return "InvokeFunction"
	}
	return r.Method + " " + r.Path
}

// Calls returns the authorizations AWS makes for r, each with the
// resource ARN and the condition keys the template's policies test. The
// rules, per service:
//
//   - DynamoDB (Service Authorization Reference, "Actions, resources, and
//     condition keys for Amazon DynamoDB"; Developer Guide, "Using IAM
//     policy conditions for fine-grained access control"): the action is
//     the operation's name on the table's ARN, or on the index's
//     (table/T/index/I) for a Query of an index; dynamodb:LeadingKeys
//     holds the partition key values the request touches: the item's key,
//     every key of a batch on that table, or the value a Query's key
//     condition sets the (table's or index's) partition key to. A
//     transaction is authorized item by item as the item's own action
//     (TransactWriteItems' Put as dynamodb:PutItem, ...: "Using IAM with
//     DynamoDB transactions").
//   - SQS: the action on the queue's ARN (from QueueUrl); a batch
//     (SendMessageBatch, DeleteMessageBatch, ...) as its single action.
//   - SNS Publish: the topic or endpoint ARN, or "*" for a phone number
//     (SMS have no resource: "Actions, resources, and condition keys for
//     Amazon SNS").
//   - SSM GetParameter: the parameter's ARN. SSM decrypts a SecureString
//     with KMS on the caller's behalf; with the AWS managed key aws/ssm,
//     which moto_server stands for, the key's own policy allows that for
//     every principal of the account through SSM, so no kms:Decrypt is
//     asked of the role (SSM User Guide, "How AWS Systems Manager
//     Parameter Store uses AWS KMS").
//   - Secrets Manager GetSecretValue: the secret's ARN.
//   - SESv2 SendEmail: the sending identity (the From address) and, when
//     the request names one, the configuration set ("Controlling access
//     to Amazon SES": both resources are authorized).
//   - Lambda Invoke: lambda:InvokeFunction on the function's ARN.
//
// Any other operation is authorized as <service>:<operation> on "*", so
// a call the template never thought of is denied rather than let
// through.
func Calls(r Request) ([]Call, error) {
	op := r.Operation()
	region := r.Region
	var body map[string]json.RawMessage
	_ = json.Unmarshal(r.Body, &body)
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(body[k], &s)
		return s
	}
	switch r.Service {
	case "dynamodb":
		return dynamoCalls(op, r.Body, region)
	case "sqs":
		q := str("QueueUrl")
		if q == "" {
			if form, err := url.ParseQuery(string(r.Body)); err == nil {
				q = form.Get("QueueUrl")
			}
		}
		res := "*"
		if q != "" {
			res = queueARN(q, region)
		}
		// A batch is authorized as its single action (SQS Developer
		// Guide, "Amazon SQS API permissions: Actions and resource
		// reference": SendMessageBatch needs sqs:SendMessage, ...).
		op = strings.TrimSuffix(op, "Batch")
		return []Call{{Action: "sqs:" + op, Resource: res}}, nil
	case "sns":
		form, _ := url.ParseQuery(string(r.Body))
		res := "*"
		if a := cmpOr(form.Get("TopicArn"), form.Get("TargetArn")); a != "" {
			res = a
		}
		return []Call{{Action: "sns:" + op, Resource: res}}, nil
	case "ssm":
		name := str("Name")
		if !strings.HasPrefix(name, "arn:") {
			if !strings.HasPrefix(name, "/") {
				name = "/" + name
			}
			name = fmt.Sprintf("arn:aws:ssm:%s:%s:parameter%s", region, Account, name)
		}
		return []Call{{Action: "ssm:" + op, Resource: name}}, nil
	case "secretsmanager":
		return []Call{{Action: "secretsmanager:" + op, Resource: secretARN(str("SecretId"), region)}}, nil
	case "ses":
		if op != "SendEmail" {
			break
		}
		from := str("FromEmailAddress")
		if _, addr, ok := strings.Cut(from, "<"); ok {
			from = strings.TrimSuffix(addr, ">")
		}
		calls := []Call{{Action: "ses:SendEmail", Resource: fmt.Sprintf("arn:aws:ses:%s:%s:identity/%s", region, Account, from)}}
		if cs := str("ConfigurationSetName"); cs != "" {
			calls = append(calls, Call{Action: "ses:SendEmail", Resource: fmt.Sprintf("arn:aws:ses:%s:%s:configuration-set/%s", region, Account, cs)})
		}
		return calls, nil
	case "lambda":
		if op != "InvokeFunction" {
			break
		}
		fn, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(r.Path, "/2015-03-31/functions/"), "/invocations"))
		if !strings.HasPrefix(fn, "arn:") {
			fn = fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", region, Account, fn)
		}
		return []Call{{Action: "lambda:InvokeFunction", Resource: fn}}, nil
	}
	return []Call{{Action: r.Service + ":" + op, Resource: "*"}}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// The partition key of the table and of each index (package tableschema's
// names: pk, attn_pk, evt_pk).
var indexPartitionKey = map[string]string{"": "pk", "attention": "attn_pk", "event": "evt_pk"}

type attrValue struct{ S, N string }

func (v attrValue) String() string { return v.S + v.N }

func dynamoCalls(op string, raw []byte, region string) ([]Call, error) {
	tableARN := func(t string) string { return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", region, Account, t) }
	item := func(action, table string, keys ...string) Call {
		c := Call{Action: "dynamodb:" + action, Resource: tableARN(table)}
		if len(keys) > 0 {
			slices.Sort(keys)
			c.Context = map[string][]string{"dynamodb:LeadingKeys": slices.Compact(keys)}
		}
		return c
	}
	type keyed struct {
		TableName string
		Key, Item map[string]attrValue
	}
	pk := func(k keyed) string {
		if v, ok := k.Key["pk"]; ok {
			return v.String()
		}
		return k.Item["pk"].String()
	}
	switch op {
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem":
		var k keyed
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("iamfront: %s: %w", op, err)
		}
		return []Call{item(op, k.TableName, pk(k))}, nil
	case "Query":
		var q struct {
			TableName, IndexName      string
			KeyConditionExpression    string
			ExpressionAttributeNames  map[string]string
			ExpressionAttributeValues map[string]attrValue
		}
		if err := json.Unmarshal(raw, &q); err != nil {
			return nil, fmt.Errorf("iamfront: Query: %w", err)
		}
		res := tableARN(q.TableName)
		if q.IndexName != "" {
			res += "/index/" + q.IndexName
		}
		c := Call{Action: "dynamodb:Query", Resource: res}
		if v, ok := queryPartition(q.KeyConditionExpression, q.ExpressionAttributeNames, q.ExpressionAttributeValues, indexPartitionKey[q.IndexName]); ok {
			c.Context = map[string][]string{"dynamodb:LeadingKeys": {v}}
		}
		return []Call{c}, nil
	case "BatchGetItem", "BatchWriteItem":
		var b struct {
			RequestItems map[string]json.RawMessage
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("iamfront: %s: %w", op, err)
		}
		var calls []Call
		for table, reqs := range b.RequestItems {
			var keys []string
			if op == "BatchGetItem" {
				var g struct{ Keys []map[string]attrValue }
				_ = json.Unmarshal(reqs, &g)
				for _, k := range g.Keys {
					keys = append(keys, k["pk"].String())
				}
			} else {
				var w []struct {
					PutRequest    *struct{ Item map[string]attrValue }
					DeleteRequest *struct{ Key map[string]attrValue }
				}
				_ = json.Unmarshal(reqs, &w)
				for _, x := range w {
					if x.PutRequest != nil {
						keys = append(keys, x.PutRequest.Item["pk"].String())
					}
					if x.DeleteRequest != nil {
						keys = append(keys, x.DeleteRequest.Key["pk"].String())
					}
				}
			}
			calls = append(calls, item(op, table, keys...))
		}
		slices.SortFunc(calls, func(a, b Call) int { return strings.Compare(a.Resource, b.Resource) })
		return calls, nil
	case "TransactWriteItems", "TransactGetItems":
		var t struct {
			TransactItems []map[string]keyed
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("iamfront: %s: %w", op, err)
		}
		as := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		var calls []Call
		for _, ti := range t.TransactItems {
			for kind, k := range ti {
				calls = append(calls, item(as[kind], k.TableName, pk(k)))
			}
		}
		return calls, nil
	}
	var t struct{ TableName string }
	_ = json.Unmarshal(raw, &t)
	if t.TableName != "" {
		return []Call{item(op, t.TableName)}, nil
	}
	return []Call{{Action: "dynamodb:" + op, Resource: "*"}}, nil
}

var eqClause = regexp.MustCompile(`^\(*\s*([#\w.]+)\s*=\s*(:\w+)\s*\)*$`)

// queryPartition returns the value a key condition sets attribute attr to
// ("#pk = :pk AND begins_with(#sk, :p)").
func queryPartition(expr string, names map[string]string, values map[string]attrValue, attr string) (string, bool) {
	for _, clause := range regexp.MustCompile(`(?i)\s+and\s+`).Split(expr, -1) {
		m := eqClause.FindStringSubmatch(strings.TrimSpace(clause))
		if m == nil {
			continue
		}
		name := m[1]
		if n, ok := names[name]; ok {
			name = n
		}
		if name == attr {
			v, ok := values[m[2]]
			return v.String(), ok
		}
	}
	return "", false
}
