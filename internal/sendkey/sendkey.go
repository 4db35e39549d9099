// Package sendkey derives the idempotency key of one logical message.
//
// The key is a pure function of what identifies the message for its
// recipient: tenant, the producer's event id, recipient id, channel and
// template. Nothing attempt-specific (receive time, SQS message id, random
// ids, provider message ids) is part of it, so every redelivery of the same
// event to the same recipient on the same channel yields the same key, and
// the same key is handed to every provider that accepts a client reference.
//
//	key      = "v1_" + hex(SHA-256(field(tenant) || field(event) || field(recipient) || field(channel) || field(template)))
//	field(s) = 4-byte big-endian length of s in bytes, then the bytes of s
//
// Length-prefixing keeps the encoding unambiguous: ("a|b", "c") and
// ("a", "b|c") never share a key.
//
// In the path of one SQS record (docs/architecture.md) the key is the third
// step: notify.Request.Key calls Derive on the parsed request (notify.Parse,
// the step before), and sender.Sender.Process claims it in the ledger with
// dispatch.Dispatcher.Claim (ledger.Ledger.Claim, the step after). The
// provider receives it as provider.Message.Key, its client key or
// reference.
package sendkey

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// Prefix starts every key of this version of the derivation.
const Prefix = "v1_"

// Len is the length of a key: the prefix and 64 hex digits.
const Len = len(Prefix) + 2*sha256.Size

// Parts are the fields a key is derived from, in contract order.
type Parts struct {
	Tenant      string
	EventID     string
	RecipientID string
	Channel     string
	Template    string
}

// Derive returns the key of p. It never fails: validation of the parts is
// the caller's job (see package notify).
func Derive(p Parts) string {
	h := sha256.New()
	var n [4]byte
	for _, f := range [...]string{p.Tenant, p.EventID, p.RecipientID, p.Channel, p.Template} {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var sum [sha256.Size]byte
	buf := make([]byte, Len)
	copy(buf, Prefix)
	hex.Encode(buf[len(Prefix):], h.Sum(sum[:0]))
	return string(buf)
}

// Valid reports whether s has the shape of a key: the v1 prefix followed by
// 64 lowercase hex digits. Use it on keys that arrive from outside (a
// callback's reference, an API path) before touching storage.
func Valid(s string) bool {
	if len(s) != Len || !strings.HasPrefix(s, Prefix) {
		return false
	}
	for _, c := range s[len(Prefix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
