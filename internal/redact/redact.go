// Package redact keeps phone numbers and email addresses out of logs.
//
// A Redactor turns an address into a stable token, so log lines, FAILED
// reasons and `sendonce inspect` output about the same recipient can be
// correlated without exposing it. The token is a keyed HMAC-SHA256 under a
// per-deployment secret: without the secret it cannot be reversed by
// hashing candidate numbers (a phone number has few enough candidates that
// an unkeyed hash of it is reversible in seconds), and two deployments with
// different secrets give unrelated tokens.
//
// Every function sets the deployment's Redactor as the default once at
// start-up (SetDefault, see lambdaenv.SetRedaction); the package-level
// Address, Text and Error use it. Until then the default is keyed with a
// random key of this process: its tokens correlate within one process
// only. A test scans the log output of full runs for raw addresses and for
// tokens not made under the deployment's key.
package redact

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
)

// MinKeyLen is the shortest key New accepts, in bytes.
const MinKeyLen = 32

// TokenHexLen is the number of hex digits of a token after its kind.
const TokenHexLen = 16

// Redactor makes address tokens under one key. It is immutable and safe
// for concurrent use.
type Redactor struct {
	key    []byte
	random bool
}

// New returns a Redactor keyed with key, which must hold at least
// MinKeyLen bytes (the generated deployment secret holds 64 characters).
func New(key []byte) (*Redactor, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("redact: key is %d bytes, want at least %d", len(key), MinKeyLen)
	}
	return &Redactor{key: append([]byte(nil), key...)}, nil
}

// Optional returns New(key), or nil for an empty key: the package-level
// functions' Redactor (Default) then applies. It is how a public
// configuration's optional RedactionKey is read.
func Optional(key []byte) (*Redactor, error) {
	if len(key) == 0 {
		return nil, nil
	}
	return New(key)
}

// NewRandom returns a Redactor keyed with 32 random bytes: its tokens
// correlate only among lines made by this Redactor, never across processes
// or deployments.
func NewRandom() *Redactor {
	key := make([]byte, MinKeyLen)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it panics if the OS has no randomness)
	return &Redactor{key: key, random: true}
}

// Random reports whether r was made by NewRandom.
func (r *Redactor) Random() bool { return r.random }

// KeyID returns 8 hex digits that identify r's key without revealing it
// (an HMAC of a fixed label), so start-up logs show which key a function
// uses and that every function uses the same.
func (r *Redactor) KeyID() string {
	return hex.EncodeToString(r.sum("sendonce redaction key id")[:4])
}

func (r *Redactor) sum(s string) []byte {
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// Address returns the token of a phone number, email address or push
// target: a kind hint and the first 16 hex digits of HMAC-SHA256(key,
// address), e.g. "phone:3f2a9c01b7e45d10". The empty string stays empty.
func (r *Redactor) Address(s string) string {
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
	return kind + ":" + hex.EncodeToString(r.sum(s))[:TokenHexLen]
}

var def atomic.Pointer[Redactor]

func init() { def.Store(NewRandom()) }

// SetDefault makes r the Redactor of the package-level functions. Call it
// once at start-up, before the process handles work; it is safe against
// concurrent readers, but tokens made before and after a change do not
// match. A nil r is ignored.
func SetDefault(r *Redactor) {
	if r != nil {
		def.Store(r)
	}
}

// Default returns the Redactor of the package-level functions.
func Default() *Redactor { return def.Load() }

// Address is Default().Address(s).
func Address(s string) string { return Default().Address(s) }

// Text is Default().Text(s, to).
func Text(s, to string) string { return Default().Text(s, to) }

// Error is Default().Error(err, to).
func Error(err error, to string) error { return Default().Error(err, to) }

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
func (r *Redactor) Text(s, to string) string {
	if to != "" {
		s = strings.ReplaceAll(s, to, r.Address(to))
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

// Error wraps err so that its text passes through r.Text (a *url.Error
// keeps only its operation and cause: its URL may carry a query with
// addresses). errors.Is and errors.As still reach err. Nil stays nil.
func (r *Redactor) Error(err error, to string) error {
	if err == nil {
		return nil
	}
	return redactedError{r, err, to}
}

type redactedError struct {
	r   *Redactor
	err error
	to  string
}

func (e redactedError) Error() string {
	var ue *url.Error
	if errors.As(e.err, &ue) {
		return e.r.Text(ue.Op+" "+ue.Err.Error(), e.to)
	}
	return e.r.Text(e.err.Error(), e.to)
}

func (e redactedError) Unwrap() error { return e.err }
