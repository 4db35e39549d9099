package httpprovider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader is the header that carries a callback's signature
// (docs/http-provider.md).
const SignatureHeader = "X-Provider-Signature"

// DefaultTolerance is the replay window Verify applies when it is given a
// tolerance of zero or less: a signature older (or further in the future)
// than this is stale.
const DefaultTolerance = 5 * time.Minute

// The errors Verify returns. A webhook answers 401 to each of them.
var (
	// ErrNoSignature: the signature header is missing or empty.
	ErrNoSignature = errors.New("httpprovider: no signature")
	// ErrBadSignature: the header is malformed, no v1 signature matches
	// the body, or no secret was configured.
	ErrBadSignature = errors.New("httpprovider: bad signature")
	// ErrStale: the signature is well formed and matches, but its
	// timestamp is outside the replay window.
	ErrStale = errors.New("httpprovider: stale signature")
)

// maxHeaderLen bounds the header Verify parses; a real one is ~80 bytes.
const maxHeaderLen = 1024

// Sign returns the X-Provider-Signature value for body sent at t:
// "t={unix seconds},v1={lowercase hex HMAC-SHA256(secret, t + "." + body)}".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks header, an X-Provider-Signature value, against body.
//
// It returns nil when one v1 signature in header is the HMAC of body under
// secret and the header's timestamp lies within tolerance of now (in either
// direction; tolerance <= 0 means DefaultTolerance). Several v1 entries are
// allowed (secret rotation); the comparison is constant-time.
//
// Errors (wrapping a sentinel, test with errors.Is): ErrNoSignature when
// header is empty; ErrBadSignature when it is malformed, when secret is
// empty, or when no signature matches; ErrStale when a signature matches
// but its timestamp is outside the window. The signature is checked before
// the timestamp, so ErrStale is never returned for a forged header.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if strings.TrimSpace(header) == "" {
		return ErrNoSignature
	}
	if len(secret) == 0 {
		return fmt.Errorf("%w: no secret configured", ErrBadSignature)
	}
	ts, unix, sigs, err := parseSignature(header)
	if err != nil {
		return err
	}
	want := mac(secret, ts, body)
	match := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			match = true
		}
	}
	if !match {
		return fmt.Errorf("%w: signature does not match", ErrBadSignature)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	age := now.Sub(time.Unix(unix, 0))
	if age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s ago, window %s", ErrStale, age.Round(time.Second), tolerance)
	}
	return nil
}

// parseSignature splits "t=...,v1=...[,v1=...]" into the timestamp as
// signed (its decimal text), its value, and the decoded v1 signatures.
// Unknown keys are ignored so a future scheme can be added alongside.
func parseSignature(header string) (ts string, unix int64, sigs [][]byte, err error) {
	if len(header) > maxHeaderLen {
		return "", 0, nil, fmt.Errorf("%w: header longer than %d bytes", ErrBadSignature, maxHeaderLen)
	}
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return "", 0, nil, fmt.Errorf("%w: malformed element", ErrBadSignature)
		}
		switch k {
		case "t":
			if ts != "" {
				return "", 0, nil, fmt.Errorf("%w: more than one timestamp", ErrBadSignature)
			}
			if v == "" || len(v) > 19 || strings.TrimLeft(v, "0123456789") != "" {
				return "", 0, nil, fmt.Errorf("%w: timestamp is not unix seconds", ErrBadSignature)
			}
			n, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil {
				return "", 0, nil, fmt.Errorf("%w: timestamp is not unix seconds", ErrBadSignature)
			}
			ts, unix = v, n
		case "v1":
			b, derr := hex.DecodeString(v)
			if derr != nil || len(b) != sha256.Size {
				return "", 0, nil, fmt.Errorf("%w: v1 is not a hex SHA-256 HMAC", ErrBadSignature)
			}
			sigs = append(sigs, b)
		}
	}
	if ts == "" {
		return "", 0, nil, fmt.Errorf("%w: no timestamp", ErrBadSignature)
	}
	if len(sigs) == 0 {
		return "", 0, nil, fmt.Errorf("%w: no v1 signature", ErrBadSignature)
	}
	return ts, unix, sigs, nil
}
