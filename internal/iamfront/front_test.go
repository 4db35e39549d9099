package iamfront_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/sendonce/sendonce/internal/iamfront"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/tableschema"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/internal/templates/dynamotemplates"
	"github.com/sendonce/sendonce/internal/testenv"
)

// as returns a DynamoDB client signing with the access key env (from
// Register) holds, at the endpoint it names: the function's view.
func as(env map[string]string) *dynamodb.Client {
	cfg := aws.Config{Region: testenv.Region, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], "")}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(env["AWS_ENDPOINT_URL_DYNAMODB"])
		o.DisableValidateResponseChecksum = true
	})
}

func register(t *testing.T, fn string, env map[string]string) (map[string]string, *iamfront.Principal) {
	t.Helper()
	f, err := iamfront.Shared()
	if err != nil {
		t.Fatal(err)
	}
	out, p, err := f.Register(fn, env)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		t.Fatalf("%s: not a function of the template", fn)
	}
	t.Cleanup(func() { f.Unregister(p) })
	return out, p
}

// TestRenderPinnedVersion is the regression test of issue 32's lost
// messages: every attempt after the first renders the template version
// its row pinned (render.RenderVersion → dynamotemplates.Get → a GetItem
// on tpl#…#v<N>). SenderRole and ReconcileWorkerRole granted GetItem
// only on v1_* and, on tpl#*, only BatchGetItem, so on AWS that read was
// AccessDenied. Both render stored templates; both must be able to.
func TestRenderPinnedVersion(t *testing.T) {
	admin := testenv.DynamoDB(t)
	table := testenv.NewTable(t, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := dynamotemplates.New(admin, table, dynamotemplates.Config{}).Put(ctx, templates.Template{
		ID: templates.ID{Tenant: "acme", Name: "otp", Channel: "sms"}, Text: "code {{.code}}"})
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"sender", "reconcileworker"} {
		t.Run(fn, func(t *testing.T) {
			env, p := register(t, fn, map[string]string{"SENDONCE_TABLE": table, "AWS_REGION": testenv.Region,
				"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t)})
			r := render.New(dynamotemplates.New(as(env), table, dynamotemplates.Config{}), render.Config{CacheTTL: -1})
			got, err := r.RenderVersion(ctx, "acme", "otp", "sms", put.Version, "", map[string]any{"code": "123456"})
			if err != nil {
				t.Fatalf("%s renders a row's pinned version: %v\ndenied: %q", fn, err, p.Denied())
			}
			if !strings.Contains(got.Body, "123456") {
				t.Errorf("rendered %q", got.Body)
			}
			if d := p.Denied(); len(d) > 0 {
				t.Errorf("denied: %q", d)
			}
		})
	}
}

// TestDenialAsAWS: a call the role does not allow is answered as
// DynamoDB answers it (HTTP 400, AccessDeniedException), so the SDK
// returns the error the product handles, and the principal records it.
func TestDenialAsAWS(t *testing.T) {
	admin := testenv.DynamoDB(t)
	table := testenv.NewTable(t, admin)
	env, p := register(t, "webhook", map[string]string{"SENDONCE_TABLE": table, "AWS_REGION": testenv.Region,
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t)})
	ctx := context.Background()
	db := as(env)
	// The webhook reads callback records (cb#) and ledger rows (v1_):
	// allowed.
	for _, pk := range []string{"cb#x", "v1_x"} {
		if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: tableschema.Key(pk)}); err != nil {
			t.Errorf("GetItem %s: %v", pk, err)
		}
	}
	// It never writes a ledger row, nor reads an API key.
	for _, c := range []struct {
		call func() error
		want string
	}{
		{func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: tableschema.Key("v1_x")})
			return err
		}, "dynamodb:PutItem on arn:aws:dynamodb:us-east-1:123456789012:table/" + table + " (dynamodb:LeadingKeys=v1_x)"},
		{func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: tableschema.Key("apikey#k")})
			return err
		}, "dynamodb:GetItem on arn:aws:dynamodb:us-east-1:123456789012:table/" + table + " (dynamodb:LeadingKeys=apikey#k)"},
	} {
		err := c.call()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
			t.Fatalf("got %v, want AccessDeniedException", err)
		}
		if !strings.Contains(ae.ErrorMessage(), "is not authorized to perform") {
			t.Errorf("message %q", ae.ErrorMessage())
		}
		if d := p.Denied(); len(d) == 0 || !strings.Contains(d[len(d)-1], c.want) || !strings.HasPrefix(d[len(d)-1], "webhook (WebhookRole): ") {
			t.Errorf("denied %q, want one naming %q", d, c.want)
		}
	}
}
