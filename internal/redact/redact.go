// Package redact keeps phone numbers and email addresses out of logs.
//
// Address returns a stable, non-reversible token for an address, so log
// lines about the same recipient can be correlated without exposing it.
// Every log line that concerns an address uses it; a test scans the log
// output of full runs for raw addresses.
package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Address returns a redacted form of a phone number, email address or push
// target: a kind hint and the first 12 hex digits of its SHA-256, e.g.
// "phone:3f2a9c01b7e4". The empty string stays empty.
func Address(s string) string {
	if s == "" {
		return ""
	}
	kind := "addr"
	switch {
	case strings.HasPrefix(s, "+"):
		kind = "phone"
	case strings.Contains(s, "@"):
		kind = "email"
	case strings.HasPrefix(s, "arn:"):
		kind = "push"
	}
	sum := sha256.Sum256([]byte(s))
	return kind + ":" + hex.EncodeToString(sum[:6])
}

var (
	phoneRE = regexp.MustCompile(`\+[0-9][0-9 ().-]{6,}[0-9]|\b[0-9]{10,15}\b`)
	emailRE = regexp.MustCompile(`[^\s<>"',;:]+@[^\s<>"',;:]+`)
)

// maxText bounds a redacted provider text.
const maxText = 200

// Text removes addresses from a provider's or server's free text (an
// error message, an SMTP reply) before it is logged or stored: to itself
// becomes its Address token, anything else shaped like an email address
// becomes "[address]" and anything shaped like a phone number (with a
// leading +, or 10 to 15 bare digits) "[number]". The result is cut to 200
// bytes.
func Text(s, to string) string {
	if to != "" {
		s = strings.ReplaceAll(s, to, Address(to))
	}
	s = emailRE.ReplaceAllStringFunc(s, func(a string) string {
		if strings.HasPrefix(a, "email:") {
			return a
		}
		return "[address]"
	})
	s = phoneRE.ReplaceAllString(s, "[number]")
	if len(s) > maxText {
		s = s[:maxText] + "…"
	}
	return s
}

// Error wraps err so that its text passes through Text (a *url.Error
// keeps only its operation and cause: its URL may carry a query with
// addresses). errors.Is and errors.As still reach err. Nil stays nil.
func Error(err error, to string) error {
	if err == nil {
		return nil
	}
	return redactedError{err, to}
}

type redactedError struct {
	err error
	to  string
}

func (e redactedError) Error() string {
	var ue *url.Error
	if errors.As(e.err, &ue) {
		return Text(ue.Op+" "+ue.Err.Error(), e.to)
	}
	return Text(e.err.Error(), e.to)
}

func (e redactedError) Unwrap() error { return e.err }
