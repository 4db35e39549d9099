package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/sendonce/sendonce/internal/opstate"
)

// exitAttention is status's exit status when something needs a person.
const exitAttention = 3

// attentionError is status's finding that something needs a person: exit
// status exitAttention, its result printed first.
type attentionError struct{ problems []string }

func (e *attentionError) Error() string {
	return "needs attention: " + strings.Join(e.problems, "; ")
}

// statusView is what status prints.
type statusView struct {
	Stack string `json:"stack,omitempty"`
	// Backlog is the notification queue's messages waiting and in flight.
	Backlog int `json:"backlog"`
	// BacklogInFlight is how many of them a sender holds now.
	BacklogInFlight int `json:"backlog_in_flight"`
	// BacklogAgeSeconds is the age of the queue's oldest message (SQS's
	// ApproximateAgeOfOldestMessage, the latest minute CloudWatch has);
	// absent when CloudWatch has no datapoint of the last 15 minutes.
	BacklogAgeSeconds *int `json:"backlog_age_seconds,omitempty"`
	// DLQDepth is the dead-letter queue's messages.
	DLQDepth int `json:"dlq_depth"`
	// Alarms are the stack's alarms in ALARM.
	Alarms []string `json:"alarms_in_alarm"`
	// Providers are the providers a sender or reconcile worker found
	// down (its latest sends in a row refused) or paused (a Retry-After),
	// until when (package opstate); absent without a table.
	Providers []opstate.ProviderStatus `json:"providers_down_or_paused,omitempty"`
	// LastReconcile is the last reconcile run the table records: when
	// it ended and its report; absent without a table or a run.
	LastReconcile *opstate.Run `json:"last_reconcile,omitempty"`
	// NeedsAttention says what a person should look at; empty: healthy.
	NeedsAttention []string `json:"needs_attention"`
}

func statusCmd(a *app) *cobra.Command {
	var (
		maxAge, maxReconcile time.Duration
		queue, dlq, table    *string
	)
	c := &cobra.Command{
		Use:         "status [--max-backlog-age D] [--queue-url URL] [--dlq-url URL]",
		Short:       "say whether the stack is healthy: backlog, DLQ depth, alarms in ALARM, providers down, the last reconcile run",
		Annotations: map[string]string{annotService: serviceSQS},
		Long: `
Shows at a glance whether a deployment needs a person: the notification
queue's backlog (messages waiting and in flight) and the age of its oldest
message (CloudWatch's ApproximateAgeOfOldestMessage), the dead-letter
queue's depth, the stack's CloudWatch alarms in ALARM (those whose name
starts with the stack's name, as CloudFormation names them), and from the
table: the providers a sender or reconcile worker found down (its latest
sends in a row refused) or paused (a Retry-After), and the last reconcile
run (when it ended, and its report).

The queues come from the stack (--stack-name or SENDONCE_STACK), else
--queue-url / --dlq-url, else SENDONCE_QUEUE_URL / SENDONCE_DLQ_URL; the
table from --table, else the stack, else SENDONCE_TABLE (without one, the
providers and the reconcile run are not read). The alarms need the
stack's name.

Exit status 0: healthy. 3: something needs a person, each named in
needs_attention and in the one line on stderr: an alarm in ALARM, a message
in the dead-letter queue, a backlog older than --max-backlog-age (default
5m), a provider known down, no reconcile run recorded or the last one
older than --max-reconcile-age (default 10m: the reconciler runs every
minute by default). A paused provider is shown, not flagged: it asked for
the pause. 1: status could not be read (an AWS error).`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			queue, dlq := cmp0(*queue, a.getenv("SENDONCE_QUEUE_URL")), cmp0(*dlq, a.getenv("SENDONCE_DLQ_URL"))
			if queue == "" || dlq == "" {
				return &usageError{cmd: c, msg: "no queues: pass --stack-name STACK (or set SENDONCE_STACK), or --queue-url and --dlq-url"}
			}
			v, err := a.status(c.Context(), queue, dlq, maxAge)
			if err != nil {
				return err
			}
			err = a.statusTable(c.Context(), &v, cmp0(*table, a.getenv("SENDONCE_TABLE")), maxReconcile)
			if err != nil {
				return err
			}
			if err := a.printer().object(v); err != nil {
				return err
			}
			if len(v.NeedsAttention) > 0 {
				return &attentionError{problems: v.NeedsAttention}
			}
			return nil
		},
	}
	c.Flags().DurationVar(&maxAge, "max-backlog-age", 5*time.Minute, "a backlog older than `D` needs a person")
	c.Flags().DurationVar(&maxReconcile, "max-reconcile-age", 10*time.Minute, "a last reconcile run older than `D` needs a person")
	table = tableFlag(c)
	queue = c.Flags().String("queue-url", "", "the notification queue's `URL` (default: the stack's, else SENDONCE_QUEUE_URL)")
	dlq = c.Flags().String("dlq-url", "", "the dead-letter queue's `URL` (default: the stack's, else SENDONCE_DLQ_URL)")
	return c
}

// cmp0 is the first of vs that is not blank, trimmed.
func cmp0(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// status reads the queues' depths, the backlog's age and the stack's
// alarms in ALARM, and says what needs a person.
func (a *app) status(ctx context.Context, queue, dlq string, maxAge time.Duration) (statusView, error) {
	q, err := a.sqsClient(ctx)
	if err != nil {
		return statusView{}, err
	}
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return statusView{}, err
	}
	cw := cloudwatch.NewFromConfig(cfg)
	v := statusView{Alarms: []string{}, NeedsAttention: []string{}}
	if a.stack != nil {
		v.Stack = a.stack.name
	}
	attrs := func(url string) (map[string]string, error) {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		}})
		if err != nil {
			return nil, &queueError{url: url, flag: "--queue-url, --dlq-url or --stack-name", err: fmt.Errorf("read the attributes of %s: %w", url, err)}
		}
		return out.Attributes, nil
	}
	n := func(m map[string]string, k sqstypes.QueueAttributeName) int {
		x, _ := strconv.Atoi(m[string(k)])
		return x
	}
	qa, err := attrs(queue)
	if err != nil {
		return v, err
	}
	v.BacklogInFlight = n(qa, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	v.Backlog = n(qa, sqstypes.QueueAttributeNameApproximateNumberOfMessages) + v.BacklogInFlight
	da, err := attrs(dlq)
	if err != nil {
		return v, err
	}
	v.DLQDepth = n(da, sqstypes.QueueAttributeNameApproximateNumberOfMessages) + n(da, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)

	now := time.Now()
	age, err := cw.GetMetricData(ctx, &cloudwatch.GetMetricDataInput{
		StartTime: aws.Time(now.Add(-15 * time.Minute)), EndTime: aws.Time(now), ScanBy: cwtypes.ScanByTimestampDescending,
		MetricDataQueries: []cwtypes.MetricDataQuery{{Id: aws.String("age"), MetricStat: &cwtypes.MetricStat{
			Metric: &cwtypes.Metric{Namespace: aws.String("AWS/SQS"), MetricName: aws.String("ApproximateAgeOfOldestMessage"),
				Dimensions: []cwtypes.Dimension{{Name: aws.String("QueueName"), Value: aws.String(path.Base(queue))}}},
			Period: aws.Int32(60), Stat: aws.String("Maximum"),
		}}},
	})
	if err != nil {
		return v, fmt.Errorf("read the backlog's age (CloudWatch GetMetricData): %w", err)
	}
	if len(age.MetricDataResults) > 0 && len(age.MetricDataResults[0].Values) > 0 {
		s := int(age.MetricDataResults[0].Values[0])
		v.BacklogAgeSeconds = &s
		if time.Duration(s)*time.Second > maxAge {
			v.NeedsAttention = append(v.NeedsAttention, fmt.Sprintf("the backlog's oldest message is %s old (over %s)", time.Duration(s)*time.Second, maxAge))
		}
	}
	if v.DLQDepth > 0 {
		v.NeedsAttention = append(v.NeedsAttention, fmt.Sprintf("%d messages in the dead-letter queue (sendonce dlq list)", v.DLQDepth))
	}

	if a.stack != nil {
		in := &cloudwatch.DescribeAlarmsInput{StateValue: cwtypes.StateValueAlarm, AlarmNamePrefix: aws.String(a.stack.name + "-")}
		for p := cloudwatch.NewDescribeAlarmsPaginator(cw, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return v, fmt.Errorf("read the stack's alarms (CloudWatch DescribeAlarms): %w", err)
			}
			for _, al := range page.MetricAlarms {
				v.Alarms = append(v.Alarms, aws.ToString(al.AlarmName))
			}
			for _, al := range page.CompositeAlarms {
				v.Alarms = append(v.Alarms, aws.ToString(al.AlarmName))
			}
		}
		for _, al := range v.Alarms {
			v.NeedsAttention = append(v.NeedsAttention, "alarm "+al+" is in ALARM (its runbook entry: docs/operations.md)")
		}
	}
	return v, nil
}

// statusTable adds to v what table records (package opstate): the
// providers known down or paused, and the last reconcile run. It does
// nothing without a table.
func (a *app) statusTable(ctx context.Context, v *statusView, table string, maxReconcile time.Duration) error {
	if table == "" {
		return nil
	}
	db, err := a.dynamoClient(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	st, err := opstate.Read(ctx, db, table, now)
	if err != nil {
		return fmt.Errorf("read the providers' states and the last reconcile run of table %s: %w", table, err)
	}
	v.Providers, v.LastReconcile = st.Providers, st.Reconcile
	for _, p := range st.Providers {
		if p.State == opstate.Down {
			v.NeedsAttention = append(v.NeedsAttention, fmt.Sprintf("provider %s is down until %s: its latest sends were refused (ProviderErrors by kind; docs/operations.md)", p.Provider, p.Until.Format(time.RFC3339)))
		}
	}
	switch {
	case st.Reconcile == nil:
		v.NeedsAttention = append(v.NeedsAttention, "no reconcile run is recorded: is the reconciler's schedule enabled?")
	case now.Sub(st.Reconcile.At) > maxReconcile:
		v.NeedsAttention = append(v.NeedsAttention, fmt.Sprintf("the last reconcile run ended %s ago (over %s)", now.Sub(st.Reconcile.At).Round(time.Second), maxReconcile))
	}
	return nil
}

// isAttention reports whether err is status's finding that something
// needs a person.
func isAttention(err error) bool {
	var ae *attentionError
	return errors.As(err, &ae)
}
