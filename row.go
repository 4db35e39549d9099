package sendonce

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/notify"
)

// State is where a message's row is: docs/architecture.md draws the
// transitions.
type State string

// The states of a row.
const (
	// StatePending: claimed; its sender may be calling the provider, or
	// the claim was released and the message waits for its next attempt.
	StatePending State = State(ledger.StatePending)
	// StateSent: the provider accepted the message. Final.
	StateSent State = State(ledger.StateSent)
	// StateFailed: the provider rejected the message for good, or its
	// validity passed before it was sent. Final.
	StateFailed State = State(ledger.StateFailed)
	// StateUncertain: an attempt may have reached the provider; the
	// reconciler settles it.
	StateUncertain State = State(ledger.StateUncertain)
	// StateAbandoned: the reconciler gave the message up without knowing
	// whether it went out (its class's policy, or its age). Final.
	StateAbandoned State = State(ledger.StateAbandoned)
)

// Final reports whether no transition leaves s: SENT, FAILED, ABANDONED.
func (s State) Final() bool { return ledger.State(s).Final() }

// Row is a message's ledger row as Ledger.Get reads it: what identifies
// the message, where it is and how each attempt ended. It never holds the
// recipient's address nor the message's content.
type Row struct {
	// Key is the message's key (notify.Request.Key).
	Key         string
	Tenant      string
	EventID     string
	RecipientID string
	Channel     notify.Channel
	Class       notify.Class
	Template    string
	// TemplateVersion is the stored template version that rendered the
	// message; zero for pre-rendered content.
	TemplateVersion int
	State           State
	// Provider is the provider of the latest attempt, ProviderMessageID
	// its id of the message (or the one a lookup or a callback found).
	Provider          string
	ProviderMessageID string
	// Reason explains FAILED, UNCERTAIN, ABANDONED and a released claim.
	Reason string
	// Attempts lists the attempts, oldest first; the last is the latest,
	// whose outcome is the row's State. The ledger keeps the latest few
	// earlier attempts only: the first listed may not be number 1.
	Attempts []Attempt
	// Delivery is the latest delivery status a provider's callback
	// reported ("delivered", "bounced", ...), DeliveryAt when the
	// provider saw it; empty when none arrived.
	Delivery   string
	DeliveryAt time.Time
	// ValidUntil is when the message stops being sendable; zero: never.
	ValidUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Attempt is one claim of a message: its number, the provider it went
// (or was to go) through, and how it ended.
type Attempt struct {
	Number   int
	Provider string
	// Ended says how an earlier attempt ended ("released: transient:
	// 503", "uncertain: timeout", "lease passed"); for the latest, the
	// row's state in lower case.
	Ended string
}

// ErrNotFound is Ledger.Get's error for a key with no row (never
// claimed, or past its retention).
var ErrNotFound = errors.New("sendonce: no row for the key")

// Get returns the row of the message whose key is key
// (notify.Request.Key), or an error matching ErrNotFound.
func (l *Ledger) Get(ctx context.Context, key string) (Row, error) {
	r, err := l.rows.Get(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return Row{}, fmt.Errorf("sendonce: get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("sendonce: get %s: %w", key, err)
	}
	return rowOf(r), nil
}

// rowOf is r without what a Row never shows (the address, the content,
// the claim's token).
func rowOf(r ledger.Record) Row {
	row := Row{
		Key: r.Key, Tenant: r.Tenant, EventID: r.EventID, RecipientID: r.RecipientID,
		Channel: notify.Channel(r.Channel), Class: notify.Class(r.Class), Template: r.Template, TemplateVersion: r.TemplateVersion,
		State: State(r.State), Provider: r.Provider, ProviderMessageID: r.ProviderMessageID, Reason: r.Reason,
		Delivery: r.DeliveryStatus, DeliveryAt: r.DeliveryAt, ValidUntil: r.ValidUntil, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	for _, h := range r.History {
		row.Attempts = append(row.Attempts, attemptOf(h))
	}
	latest := strings.ToLower(string(r.State))
	if r.Released {
		latest = "released: " + r.Reason
	}
	row.Attempts = append(row.Attempts, Attempt{Number: r.Attempts, Provider: r.Provider, Ended: latest})
	return row
}

// attemptOf reads an entry of a row's history (ledger.AttemptSummary:
// "2 twilio released: transient: 20429").
func attemptOf(h string) Attempt {
	num, rest, _ := strings.Cut(h, " ")
	prov, ended, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(num)
	if prov == "none" {
		prov = ""
	}
	return Attempt{Number: n, Provider: prov, Ended: ended}
}
