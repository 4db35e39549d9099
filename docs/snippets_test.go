package docs_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/lambdaapp"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider"
)

// The snippets of docs/library.md that no example program holds, as code
// the compiler checks (TestLibrarySnippetsCompiled finds each snippet in
// a Go file; these functions are never run).
var _ = []any{producer, reconcilerWithGateway, createTable}

// Order and User stand for a producer's own types.
type (
	Order struct{ ID string }
	User  struct{ ID, Phone string }
)

func producer(ctx context.Context, awsCfg aws.Config, queueURL string, order Order, user User) (string, error) {
	req := notify.Request{
		TenantID:  "acme",
		EventID:   order.ID + "-shipped", // your id of the business event: the same on every retry
		Channel:   notify.ChannelSMS,
		Template:  "order_shipped",
		Recipient: notify.Recipient{ID: user.ID, Phone: user.Phone},
		Data:      map[string]any{"order_id": order.ID},
	}
	id, err := sendonce.Enqueue(ctx, sqs.NewFromConfig(awsCfg), queueURL, req)
	return id, err
}

func reconcilerWithGateway(ctx context.Context, gw provider.Adapter, withGateway func(sendonce.Routes, provider.Adapter) sendonce.Routes) {
	env := lambdaapp.LoadEnvironment(ctx, "reconciler")
	cfg, err := env.ReconcilerConfig(ctx)
	env.Must(err)
	cfg.Routes = withGateway(cfg.Routes, gw) // the same route as the sender's
	r, err := sendonce.NewReconciler(cfg)
	env.Must(err)
	lambdaapp.Serve(env, func(ctx context.Context, _ events.EventBridgeEvent) (sendonce.ReconcileReport, error) {
		return r.Run(ctx)
	})
}

func createTable(ctx context.Context, db *dynamodb.Client, name string) error {
	if _, err := db.CreateTable(ctx, sendonce.TableInput(name)); err != nil {
		return err
	}
	// wait until ACTIVE (dynamodb.NewTableExistsWaiter), then:
	_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(sendonce.TTLAttribute), Enabled: aws.Bool(true)},
	})
	return err
}

// elision is a snippet line that stands for lines left out: the parts
// around it must follow each other in the same file.
const elision = "// …"

// TestLibrarySnippetsCompiled: every Go snippet of docs/library.md is
// code that go test compiles: its lines (spacing aside; a line "// …"
// stands for lines left out) are found, in order, in one Go file of
// docs/ or examples/ (this file's functions, the example programs and
// their tests).
func TestLibrarySnippetsCompiled(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile(filepath.Join(root, "docs", "library.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				b, err := os.ReadFile(path)
				sources = append(sources, normalize(string(b)))
				return err
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(md), -1)
	if len(blocks) < 5 {
		t.Fatalf("docs/library.md has %d Go snippets, want at least 5", len(blocks))
	}
	for _, b := range blocks {
		parts := strings.Split(normalize(b[1]), normalize(elision))
		if !slices.ContainsFunc(sources, func(src string) bool { return inOrder(src, parts) }) {
			t.Errorf("docs/library.md's snippet is in no Go file of docs/ or examples/, so nothing compiles it:\n%s", b[1])
		}
	}
}

// normalize collapses each line's spacing (gofmt aligns differently
// inside and outside a function) and drops blank lines.
func normalize(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if f := strings.Fields(line); len(f) > 0 {
			b.WriteString(strings.Join(f, " ") + "\n")
		}
	}
	return b.String()
}

// inOrder reports whether src holds each part, whole lines, in order.
func inOrder(src string, parts []string) bool {
	src = "\n" + src
	for _, p := range parts {
		i := strings.Index(src, "\n"+p)
		if i < 0 {
			return false
		}
		src = src[i+len(p):]
	}
	return true
}
