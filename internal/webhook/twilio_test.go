package webhook

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/sendkey"
)

// twilioDocVector is the worked example of Twilio's request-validation
// documentation (twilio-php's docs/usage/validation.rst, "Validate Incoming
// Requests"): auth token 12345, this URL and these POST parameters give
// this signature.
var twilioDocVector = struct {
	token, url, signature string
	params                url.Values
}{
	token: "12345",
	url:   "https://mycompany.com/myapp.php?foo=1&bar=2",
	params: url.Values{
		"CallSid": {"CA1234567890ABCDE"},
		"Caller":  {"+14158675309"},
		"Digits":  {"1234"},
		"From":    {"+14158675309"},
		"To":      {"+18005551212"},
	},
	signature: "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
}

func TestTwilioSignatureOfficialVector(t *testing.T) {
	t.Parallel()
	v := twilioDocVector
	if got := TwilioSignature(v.token, v.url, v.params); got != v.signature {
		t.Errorf("TwilioSignature = %s, want %s", got, v.signature)
	}
	if err := VerifyTwilio(v.token, v.url, v.params, v.signature); err != nil {
		t.Errorf("VerifyTwilio(official vector) = %v, want nil", err)
	}
}

func TestVerifyTwilio(t *testing.T) {
	t.Parallel()
	v := twilioDocVector
	changed := url.Values{}
	for k, vs := range v.params {
		changed[k] = vs
	}
	changed.Set("Digits", "1235")
	withPort := TwilioSignature(v.token, "https://mycompany.com:443/myapp.php?foo=1&bar=2", v.params)
	httpNoPort := TwilioSignature(v.token, "http://mycompany.com/cb?key=1", v.params)
	tests := []struct {
		name      string
		token     string
		url       string
		params    url.Values
		signature string
		wantErr   bool
	}{
		{"OK", v.token, v.url, v.params, v.signature, false},
		{"SignedWithoutPortSeenWithPort", v.token, "https://mycompany.com:443/myapp.php?foo=1&bar=2", v.params, v.signature, false},
		{"SignedWithPortSeenWithout", v.token, v.url, v.params, withPort, false},
		{"HTTPSignedWithoutPortSeenWith80", v.token, "http://mycompany.com:80/cb?key=1", v.params, httpNoPort, false},
		{"OtherPortIsNotDefault", v.token, "https://mycompany.com:8443/myapp.php?foo=1&bar=2", v.params, v.signature, true},
		{"Missing", v.token, v.url, v.params, "", true},
		{"NotBase64", v.token, v.url, v.params, "!!!", true},
		// The decoder skips line breaks: a valid signature with one inside
		// is not the canonical encoding (FuzzVerifyTwilio found it).
		{"LineBreakInside", v.token, v.url, v.params, v.signature[:10] + "\n" + v.signature[10:], true},
		{"WrongLength", v.token, v.url, v.params, "AAAA", true},
		{"WrongToken", "54321", v.url, v.params, v.signature, true},
		{"NoToken", "", v.url, v.params, v.signature, true},
		{"ParamChanged", v.token, v.url, changed, v.signature, true},
		{"QueryChanged", v.token, "https://mycompany.com/myapp.php?foo=1&bar=3", v.params, v.signature, true},
		{"SchemeChanged", v.token, "http://mycompany.com/myapp.php?foo=1&bar=2", v.params, v.signature, true},
		{"BadURL", v.token, "::", v.params, v.signature, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := VerifyTwilio(tt.token, tt.url, tt.params, tt.signature)
			if tt.wantErr && !errors.Is(err, ErrUnauthorized) {
				t.Errorf("VerifyTwilio = %v, want ErrUnauthorized", err)
			}
			if !tt.wantErr && err != nil {
				t.Errorf("VerifyTwilio = %v, want nil", err)
			}
		})
	}
}

func TestTwilioSignatureRepeatedParams(t *testing.T) {
	t.Parallel()
	// A repeated name is signed name+value per value, values sorted.
	a := TwilioSignature("t", "https://x/cb", url.Values{"A": {"2", "1"}, "B": {"x"}})
	b := TwilioSignature("t", "https://x/cb", url.Values{"B": {"x"}, "A": {"1", "2"}})
	c := TwilioSignature("t", "https://x/cbA1A2Bx", nil)
	if a != b || a != c {
		t.Errorf("signatures differ: %s %s %s", a, b, c)
	}
}

func TestParseTwilioCallback(t *testing.T) {
	t.Parallel()
	q := url.Values{KeyParam: {testKey}}
	form := func(kv ...string) url.Values {
		v := url.Values{"AccountSid": {"AC1"}, "To": {"+15551234567"}, "From": {"+15557654321"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		got, err := ParseTwilioCallback(q, form("MessageSid", "SM1", "MessageStatus", "undelivered", "ErrorCode", "30003"), "")
		if err != nil {
			t.Fatalf("ParseTwilioCallback: %v", err)
		}
		want := Callback{Provider: ProviderTwilio, EventID: "SM1:undelivered", Key: testKey, Status: StatusUndelivered, ProviderMessageID: "SM1", ErrorCode: "30003"}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("IdempotencyToken", func(t *testing.T) {
		t.Parallel()
		got, err := ParseTwilioCallback(q, form("MessageSid", "SM1", "MessageStatus", "delivered"), "tok-1")
		if err != nil {
			t.Fatalf("ParseTwilioCallback: %v", err)
		}
		if got.EventID != "tok-1" || got.DedupID() != "cb#twilio#tok-1" {
			t.Errorf("EventID = %q, DedupID = %q; want tok-1", got.EventID, got.DedupID())
		}
	})
	t.Run("LegacyNames", func(t *testing.T) {
		t.Parallel()
		got, err := ParseTwilioCallback(q, form("SmsSid", "SM2", "SmsStatus", "scheduled"), "")
		if err != nil || got.ProviderMessageID != "SM2" || got.Status != StatusQueued {
			t.Errorf("got %+v, %v; want SM2 queued", got, err)
		}
	})
	bad := []struct {
		name  string
		query url.Values
		form  url.Values
		token string
		want  error
	}{
		{"NoKey", url.Values{}, form("MessageSid", "SM1", "MessageStatus", "sent"), "", ErrMalformed},
		{"BadKey", url.Values{KeyParam: {"v1_nothex"}}, form("MessageSid", "SM1", "MessageStatus", "sent"), "", ErrMalformed},
		{"NoSid", q, form("MessageStatus", "sent"), "", ErrMalformed},
		{"NoStatus", q, form("MessageSid", "SM1"), "", ErrMalformed},
		{"LongSid", q, form("MessageSid", strings.Repeat("S", 300), "MessageStatus", "sent"), "", ErrMalformed},
		{"ControlToken", q, form("MessageSid", "SM1", "MessageStatus", "sent"), "a\nb", ErrMalformed},
		{"Inbound", q, form("MessageSid", "SM1", "MessageStatus", "received"), "", ErrIgnoredStatus},
		{"Partial", q, form("MessageSid", "SM1", "MessageStatus", "partially_delivered"), "", ErrIgnoredStatus},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseTwilioCallback(tt.query, tt.form, tt.token)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "+1555") {
				t.Errorf("error %q quotes a phone number", err)
			}
		})
	}
}

func FuzzParseTwilioCallback(f *testing.F) {
	f.Add("key="+testKey, "MessageSid=SM1&MessageStatus=delivered&To=%2B15551234567", "")
	f.Add("key="+testKey, "SmsSid=SM1&SmsStatus=sent", "tok")
	f.Fuzz(func(t *testing.T, rawQuery, body, token string) {
		q, err1 := url.ParseQuery(rawQuery)
		form, err2 := url.ParseQuery(body)
		if err1 != nil || err2 != nil {
			return
		}
		cb, err := ParseTwilioCallback(q, form, token)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrIgnoredStatus) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if !sendkey.Valid(cb.Key) || !cb.Status.Known() || cb.ProviderMessageID == "" || cb.EventID == "" {
			t.Fatalf("accepted an invalid callback %+v", cb)
		}
		if !strings.HasPrefix(cb.DedupID(), "cb#twilio#") {
			t.Fatalf("DedupID = %q", cb.DedupID())
		}
	})
}

func FuzzVerifyTwilio(f *testing.F) {
	v := twilioDocVector
	f.Add(v.url, "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212", v.signature)
	f.Add("https://h:443/cb?key=x", "a=1", "AAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	f.Fuzz(func(t *testing.T, rawURL, body, sig string) {
		params, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		err = VerifyTwilio(v.token, rawURL, params, sig)
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("unclassified error %v", err)
		}
		if err == nil {
			// Only a signature that some port variant produces is accepted.
			variants, perr := portVariants(rawURL)
			if perr != nil {
				t.Fatalf("accepted an unparseable URL %q", rawURL)
			}
			ok := false
			for _, u := range variants {
				ok = ok || TwilioSignature(v.token, u, params) == sig
			}
			if !ok {
				t.Fatalf("accepted signature %q for %q", sig, rawURL)
			}
		}
	})
}
