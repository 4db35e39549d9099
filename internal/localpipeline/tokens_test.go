package localpipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/redact"
)

func TestLogLeaks(t *testing.T) {
	t.Parallel()
	rd, other := redact.NewRandom(), redact.NewRandom()
	const phone, email = "+15551234567", "ana@example.com"
	addrs := []string{phone, email}
	start := fmt.Sprintf(`{"msg":"address tokens keyed","redact_key_id":%q}`+"\n", rd.KeyID())
	sum := sha256.Sum256([]byte(phone))
	unkeyed := "phone:" + hex.EncodeToString(sum[:6])
	tests := []struct {
		name, logs, want string
	}{
		{"Clean", start + `{"to":"` + rd.Address(phone) + `"} {"to":"` + rd.Address(email) + `"}`, ""},
		{"RawAddress", start + `{"to":"` + phone + `"}`, "raw address " + phone},
		{"UnkeyedToken", start + `{"to":"` + unkeyed + `"}`, "address token " + unkeyed},
		{"OtherKey", start + `{"to":"` + other.Address(email) + `"}`, "address token " + other.Address(email)},
		{"NoKeyLine", `{"to":"` + rd.Address(phone) + `"}`, "no start-up line"},
		{"OtherKeyLine", strings.Replace(start, rd.KeyID(), other.KeyID(), 1), "no start-up line"},
		{"RandomKey", start + `{"level":"WARN","msg":"address tokens use a random key of this container"}`, "random key"},
		// An instance never invoked has not started: no output, no leak.
		{"NoOutput", "", ""},
		// A start-up that failed before reading the key handled no work.
		{"StartUpFailed", `{"level":"ERROR","msg":"start-up failed","error":"SENDONCE_REDACT_KEY_PARAM: timeout"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := LogLeaks("sender-1", tt.logs, rd, addrs)
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("LogLeaks = %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want) || !strings.HasPrefix(got[0], "sender-1: ")):
				t.Errorf("LogLeaks = %q, want one line about %q", got, tt.want)
			}
		})
	}
	if rd.Address(phone) == redact.Address(phone) {
		t.Error("the pipeline key gives the process default's tokens")
	}
}
