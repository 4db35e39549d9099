package httpprovider

// The JSON shapes of the generic HTTP provider protocol
// (docs/http-provider.md), shared by the adapter, the simulator and the webhook.

// SendRequest is the body of POST {base}/messages.
type SendRequest struct {
	Channel string `json:"channel"`
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
	// HTML is an email's HTML part, sent beside Body (the text part) when
	// the message has one. Optional and omitted when empty, so a gateway
	// written before it existed reads the same body as before.
	HTML        string `json:"html,omitempty"`
	Reference   string `json:"reference"`
	CallbackURL string `json:"callback_url,omitempty"`
}

// MessageStatus is a message's status as the provider reports it.
type MessageStatus string

// The statuses the protocol names. A provider may report others; the
// adapter treats an unknown one as an error of the lookup.
const (
	StatusAccepted    MessageStatus = "accepted"
	StatusQueued      MessageStatus = "queued"
	StatusSent        MessageStatus = "sent"
	StatusDelivered   MessageStatus = "delivered"
	StatusUndelivered MessageStatus = "undelivered"
	StatusFailed      MessageStatus = "failed"
	StatusRejected    MessageStatus = "rejected"
)

// Accepted reports whether s means the provider took the message
// (accepted, queued, sent or delivered).
func (s MessageStatus) Accepted() bool {
	switch s {
	case StatusAccepted, StatusQueued, StatusSent, StatusDelivered:
		return true
	}
	return false
}

// Failed reports whether s means the message failed for good (failed,
// undelivered or rejected).
func (s MessageStatus) Failed() bool {
	switch s {
	case StatusFailed, StatusUndelivered, StatusRejected:
		return true
	}
	return false
}

// MessageInfo is one message in a send answer or a lookup answer.
type MessageInfo struct {
	ID     string        `json:"id"`
	Status MessageStatus `json:"status"`
	// Reason explains a failed status, when the provider gives one.
	Reason string `json:"reason,omitempty"`
}

// LookupResponse is the body of a 200 answer to
// GET {base}/messages?reference={key}.
type LookupResponse struct {
	Messages []MessageInfo `json:"messages"`
}

// ErrorResponse is the body of an error answer: {"error":"..."}.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Callback is the body of a delivery callback (docs/http-provider.md).
type Callback struct {
	EventID   string        `json:"event_id"`
	MessageID string        `json:"message_id"`
	Reference string        `json:"reference"`
	Status    MessageStatus `json:"status"`
	// Timestamp is when the status was reached, RFC 3339 in UTC.
	Timestamp string `json:"timestamp"`
}
