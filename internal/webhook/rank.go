package webhook

// Status is a provider-neutral delivery status. Provider parsers map their
// own vocabulary onto these values; the ledger stores them as they are.
type Status string

// The delivery statuses a callback can carry.
const (
	// StatusAccepted: the provider took the message.
	StatusAccepted Status = "accepted"
	// StatusQueued: the provider queued the message (Twilio: queued,
	// scheduled).
	StatusQueued Status = "queued"
	// StatusSending: the provider is handing the message to the carrier.
	StatusSending Status = "sending"
	// StatusSent: the provider handed the message to the carrier or MTA.
	StatusSent Status = "sent"
	// StatusDelivered: the carrier or receiving MTA confirmed delivery.
	StatusDelivered Status = "delivered"
	// StatusRead: the recipient's client reported the message read
	// (Twilio's WhatsApp and RCS channels).
	StatusRead Status = "read"
	// StatusUndelivered: the carrier could not deliver the message.
	StatusUndelivered Status = "undelivered"
	// StatusFailed: the provider could not send the message.
	StatusFailed Status = "failed"
	// StatusRejected: the provider refused the message.
	StatusRejected Status = "rejected"
	// StatusCanceled: a scheduled message was canceled before sending.
	StatusCanceled Status = "canceled"
	// StatusBounced: the recipient's mail system returned the message,
	// possibly after first accepting it.
	StatusBounced Status = "bounced"
	// StatusComplained: the recipient reported the email as spam (an
	// SES complaint event); email only.
	StatusComplained Status = "complained"
)

// Channel names as in the notification request (docs/request.md).
const (
	channelEmail = "email"
)

// Ranks. A status is written to a ledger row only over a lower rank, so a
// late callback never moves a row's delivery status backwards.
//
// Progress statuses rank in their natural order on every channel:
//
//	accepted 1 < queued 2 < sending 3 < sent 4
//
// SMS and push (and any channel not named below): a failure (undelivered,
// failed, rejected, canceled, bounced) is terminal over every progress
// status, and a carrier's delivery receipt is the strongest evidence there
// is, so it ranks above the failures:
//
//	sent 4 < failures 6 < delivered 7 < read 8
//
// Email: the receiving MTA's "delivered" only means it accepted the
// message, and a bounce can follow it (an asynchronous bounce), so for
// email every failure ranks above delivered and a bounce above them all:
//
//	sent 4 < delivered 5 < read 6 < failures 7 < bounced 8 < complained 9
//
// A complaint (email only) ranks above everything: the recipient got the
// message and marked it as spam, the one status an operator must act on.
//
// Failures share one rank on purpose: the first failure reported is kept,
// and a second, different failure is a late callback, not a change.
var (
	progressRanks = map[Status]int{
		StatusAccepted: 1,
		StatusQueued:   2,
		StatusSending:  3,
		StatusSent:     4,
	}
	defaultRanks = map[Status]int{
		StatusUndelivered: 6,
		StatusFailed:      6,
		StatusRejected:    6,
		StatusCanceled:    6,
		StatusBounced:     6,
		StatusDelivered:   7,
		StatusRead:        8,
	}
	emailRanks = map[Status]int{
		StatusDelivered:   5,
		StatusRead:        6,
		StatusUndelivered: 7,
		StatusFailed:      7,
		StatusRejected:    7,
		StatusCanceled:    7,
		StatusBounced:     8,
		StatusComplained:  9,
	}
)

// Rank returns the rank of status s on channel (see the table above), and
// false when s is not a known status.
func Rank(channel string, s Status) (int, bool) {
	if r, ok := progressRanks[s]; ok {
		return r, true
	}
	ranks := defaultRanks
	if channel == channelEmail {
		ranks = emailRanks
	}
	r, ok := ranks[s]
	return r, ok
}

// Known reports whether s is one of the statuses above.
func (s Status) Known() bool {
	_, ok := Rank("", s)
	return ok
}
