// Command embedded is sendonce embedded in a program of your own, built
// from the library's public constructors alone: no Lambda, no
// lambdaapp, no SENDONCE_* variable read by the library.
//
//   - the ledger on DynamoDB (sendonce.NewDynamoLedger);
//   - the message's template put through the public API
//     (Ledger.PutTemplate);
//   - the sms route: an adapter of its own for an in-house SMS gateway
//     (package smsgw, beside own-lambda) first, Amazon SNS through
//     provider/snsprovider after it, tried only when the gateway refused
//     a message before accepting anything;
//   - Sender.Send per request, and Ledger.Get to read what the ledger
//     recorded: the row's state and the provider of each attempt.
//
// It reads requests (the JSON of docs/request.md, one a line) on stdin,
// sends each once, and prints one JSON line per request: its event, the
// disposition, the provider, and the row's state. Run it twice over the
// same input: the second run sends nothing (every result "duplicate").
//
// Its own configuration, read here and handed to the constructors:
//
//	EMBEDDED_TABLE   the DynamoDB table (sendonce create-tables, or sendonce.TableInput)
//	SMSGW_URL        the gateway's base URL
//	SMSGW_API_KEY    its API key
//	SNS_ORIGINATION  the number SNS sends from (optional)
//
// The AWS configuration (Region, credentials, endpoints) is read the
// SDK's standard way.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/examples/own-lambda/smsgw"
	"github.com/sendonce/sendonce/notify"
	"github.com/sendonce/sendonce/provider/snsprovider"
)

// Deps are the clients and settings the program is built from.
type Deps struct {
	DynamoDB      *dynamodb.Client
	Table         string
	SNS           snsprovider.Publisher
	GatewayURL    string
	GatewayKey    string
	SNSOriginator string
	// SNSTimeout bounds one Publish; zero is the adapter's default (5 s).
	SNSTimeout time.Duration
	Logger     *slog.Logger
}

// Line is what the program prints for one request.
type Line struct {
	Event       string `json:"event"`
	Disposition string `json:"disposition"`
	Provider    string `json:"provider,omitempty"`
	State       string `json:"state,omitempty"`
	Attempts    int    `json:"attempts,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// shipped is the template the requests name: put once, versioned by the
// ledger.
var shipped = sendonce.Template{
	TemplateID: sendonce.TemplateID{Tenant: "acme", Name: "order_shipped", Channel: notify.ChannelSMS},
	Text:       "Your order {{.order_id}} has shipped.",
}

// Build puts the template and returns the sender and the ledger.
func Build(ctx context.Context, d Deps) (*sendonce.Sender, *sendonce.Ledger, error) {
	ledger, err := sendonce.NewDynamoLedger(d.DynamoDB, d.Table, sendonce.DefaultRetention)
	if err != nil {
		return nil, nil, err
	}
	// A template is versioned: putting the same text again stores a new
	// version, which a sender reads as the tenant's latest.
	if _, err := ledger.PutTemplate(ctx, shipped); err != nil {
		return nil, nil, fmt.Errorf("put template: %w", err)
	}
	gw, err := smsgw.New(d.GatewayURL, d.GatewayKey, nil)
	if err != nil {
		return nil, nil, err
	}
	viaSNS, err := snsprovider.New(d.SNS, snsprovider.Options{OriginationNumber: d.SNSOriginator, Timeout: d.SNSTimeout, Logger: d.Logger})
	if err != nil {
		return nil, nil, err
	}
	s, err := sendonce.NewSender(sendonce.SenderConfig{
		Ledger:      ledger,
		Routes:      sendonce.Routes{notify.ChannelSMS: {gw, viaSNS}},
		Logger:      d.Logger,
		SendTimeout: 20 * time.Second,
	})
	if err != nil {
		return nil, nil, err
	}
	return s, ledger, nil
}

// Run sends each request of in once and writes a Line per request to out.
func Run(ctx context.Context, s *sendonce.Sender, ledger *sendonce.Ledger, in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var req notify.Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("a request that is not JSON: %w", err)
		}
		// Never queued: validity counts from now.
		res := s.Send(ctx, req, time.Time{})
		line := Line{Event: req.EventID, Disposition: res.Disposition.String(), Provider: res.Provider, Reason: res.Reason}
		if res.Invalid != nil {
			line.Reason = res.Invalid.Error()
		}
		row, err := ledger.Get(ctx, res.Key)
		switch {
		case errors.Is(err, sendonce.ErrNotFound): // nothing was claimed (invalid, or retry)
		case err != nil:
			return err
		default:
			line.State, line.Attempts = string(row.State), len(row.Attempts)
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return sc.Err()
}

func main() {
	ctx := context.Background()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(ctx, log); err != nil {
		log.Error("embedded", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	s, ledger, err := Build(ctx, Deps{
		DynamoDB: dynamodb.NewFromConfig(awsCfg), Table: os.Getenv("EMBEDDED_TABLE"),
		SNS: sns.NewFromConfig(awsCfg), SNSOriginator: os.Getenv("SNS_ORIGINATION"),
		GatewayURL: os.Getenv("SMSGW_URL"), GatewayKey: os.Getenv("SMSGW_API_KEY"), Logger: log,
	})
	if err != nil {
		return err
	}
	return Run(ctx, s, ledger, os.Stdin, os.Stdout)
}
