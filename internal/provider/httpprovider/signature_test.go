package httpprovider_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/provider/httpprovider"
)

func TestSignVector(t *testing.T) {
	t.Parallel()
	// Computed independently: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac secret
	got := httpprovider.Sign([]byte("secret"), time.Unix(1700000000, 0), []byte(`{"a":1}`))
	want := "t=1700000000,v1=" + mustOpenSSL
	if got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

const mustOpenSSL = "49f24e537407743fa4a0242bb63b94b9a47ee99cbbe071ccd8a22550ae411686"

func TestVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("whsec-test")
	body := []byte(`{"event_id":"evt_1","status":"delivered"}`)
	now := time.Unix(1_800_000_000, 0)
	good := httpprovider.Sign(secret, now.Add(-time.Minute), body)
	tests := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		want   error
	}{
		{"OK", secret, good, body, nil},
		{"OKWithSpaces", secret, strings.ReplaceAll(good, ",", " , "), body, nil},
		{"OKRotated", secret, good + ",v1=" + strings.Repeat("ab", 32), body, nil},
		{"OKFutureWithinWindow", secret, httpprovider.Sign(secret, now.Add(4*time.Minute), body), body, nil},
		{"Missing", secret, "", body, httpprovider.ErrNoSignature},
		{"Blank", secret, "   ", body, httpprovider.ErrNoSignature},
		{"WrongSecret", []byte("other"), good, body, httpprovider.ErrBadSignature},
		{"EmptySecret", nil, good, body, httpprovider.ErrBadSignature},
		{"TamperedBody", secret, good, append([]byte{}, append(body, ' ')...), httpprovider.ErrBadSignature},
		{"TamperedTime", secret, strings.Replace(good, "t=", "t=1", 1), body, httpprovider.ErrBadSignature},
		{"NoV1", secret, "t=1800000000", body, httpprovider.ErrBadSignature},
		{"NoT", secret, "v1=" + strings.Repeat("ab", 32), body, httpprovider.ErrBadSignature},
		{"TwoT", secret, "t=1,t=2,v1=" + strings.Repeat("ab", 32), body, httpprovider.ErrBadSignature},
		{"NegativeT", secret, "t=-5,v1=" + strings.Repeat("ab", 32), body, httpprovider.ErrBadSignature},
		{"ShortV1", secret, "t=1800000000,v1=abcd", body, httpprovider.ErrBadSignature},
		{"NotHex", secret, "t=1800000000,v1=" + strings.Repeat("zz", 32), body, httpprovider.ErrBadSignature},
		{"Garbage", secret, "garbage", body, httpprovider.ErrBadSignature},
		{"TooLong", secret, good + strings.Repeat(",x=y", 400), body, httpprovider.ErrBadSignature},
		{"Stale", secret, httpprovider.Sign(secret, now.Add(-6*time.Minute), body), body, httpprovider.ErrStale},
		{"FarFuture", secret, httpprovider.Sign(secret, now.Add(6*time.Minute), body), body, httpprovider.ErrStale},
		{"StaleForgedIsBad", []byte("other"), httpprovider.Sign(secret, now.Add(-time.Hour), body), body, httpprovider.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := httpprovider.Verify(tt.secret, tt.header, tt.body, now, 0)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyTolerance(t *testing.T) {
	t.Parallel()
	secret, body := []byte("k"), []byte("{}")
	now := time.Unix(1_800_000_000, 0)
	h := httpprovider.Sign(secret, now.Add(-30*time.Second), body)
	if err := httpprovider.Verify(secret, h, body, now, 10*time.Second); !errors.Is(err, httpprovider.ErrStale) {
		t.Errorf("Verify with 10s tolerance = %v, want ErrStale", err)
	}
	if err := httpprovider.Verify(secret, h, body, now, time.Minute); err != nil {
		t.Errorf("Verify with 1m tolerance = %v, want nil", err)
	}
}

func FuzzVerify(f *testing.F) {
	secret := []byte("fuzz-secret")
	now := time.Unix(1_800_000_000, 0)
	f.Add(httpprovider.Sign(secret, now, []byte("body")), []byte("body"))
	f.Add("t=1800000000,v1=", []byte(""))
	f.Add("t=,v1=00", []byte("x"))
	f.Add(",,,=,=", []byte("x"))
	f.Add("t=99999999999999999999,v1="+strings.Repeat("0", 64), []byte("x"))
	f.Add("v1=1,t=2,foo", []byte{0xff})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := httpprovider.Verify(secret, header, body, now, 0)
		if err == nil {
			// An accepted header must hold the true signature of body
			// for its own timestamp.
			var ts int64 = -1
			for part := range strings.SplitSeq(header, ",") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
					n, perr := strconv.ParseInt(v, 10, 64)
					if perr != nil {
						t.Fatalf("accepted header %q with bad t", header)
					}
					ts = n
				}
			}
			want := strings.SplitN(httpprovider.Sign(secret, time.Unix(ts, 0), body), ",", 2)[1]
			if !strings.Contains(strings.ToLower(header), want) {
				t.Fatalf("Verify accepted %q, which lacks %s", header, want)
			}
			return
		}
		if !errors.Is(err, httpprovider.ErrNoSignature) && !errors.Is(err, httpprovider.ErrBadSignature) && !errors.Is(err, httpprovider.ErrStale) {
			t.Fatalf("Verify(%q) = %v, not a sentinel", header, err)
		}
		// A header that is re-signed correctly always verifies.
		if err := httpprovider.Verify(secret, httpprovider.Sign(secret, now, body), body, now, 0); err != nil {
			t.Fatalf("Verify(Sign) = %v", err)
		}
	})
}
