package localpipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/redact"
)

// TestScanKeys: with the deployment's Redactor, Scan reports a raw
// address, an unkeyed token, a token made under another key, a missing or
// foreign key line and a random key, and nothing for an instance that
// never started or whose start-up failed before it read the key.
func TestScanKeys(t *testing.T) {
	t.Parallel()
	rd, other := redact.NewRandom(), redact.NewRandom()
	const phone, email = "+15551234567", "ana@example.com"
	addrs := []string{phone, email}
	start := fmt.Sprintf(`{"msg":"address tokens keyed","redact_key_id":%q}`+"\n", rd.KeyID())
	sum := sha256.Sum256([]byte(phone))
	unkeyed := "phone:" + hex.EncodeToString(sum[:6])
	tests := []struct {
		name, logs string
		want       Leak // zero: none
	}{
		{"Clean", start + `{"to":"` + rd.Address(phone) + `"} {"to":"` + rd.Address(email) + `"}`, Leak{}},
		{"RawAddress", start + `{"to":"` + phone + `"}`, Leak{Form: LeakRaw, Address: phone}},
		{"UnkeyedToken", start + `{"to":"` + unkeyed + `"}`, Leak{Form: LeakUnkeyed, Address: phone, Token: unkeyed}},
		{"OtherKey", start + `{"to":"` + other.Address(email) + `"}`, Leak{Form: LeakOtherKey, Token: other.Address(email)}},
		{"NoKeyLine", `{"to":"` + rd.Address(phone) + `"}`, Leak{Form: LeakNoKeyLine}},
		{"OtherKeyLine", strings.Replace(start, rd.KeyID(), other.KeyID(), 1), Leak{Form: LeakNoKeyLine}},
		{"RandomKey", start + `{"level":"WARN","msg":"address tokens use a random key of this container"}`, Leak{Form: LeakRandomKey}},
		// An instance never invoked has not started: no output, no leak.
		{"NoOutput", "", Leak{}},
		// A start-up that failed before reading the key handled no work.
		{"StartUpFailed", `{"level":"ERROR","msg":"start-up failed","error":"SENDONCE_REDACT_KEY_PARAM: timeout"}`, Leak{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Scan(map[string]string{"sender-1": tt.logs}, rd, addrs)
			switch {
			case tt.want == Leak{} && len(got) != 0:
				t.Errorf("Scan = %+v, want none", got)
			case tt.want != Leak{} && (len(got) != 1 || got[0] != Leak{Instance: "sender-1", Form: tt.want.Form, Address: tt.want.Address, Token: tt.want.Token}):
				t.Errorf("Scan = %+v, want one %+v of sender-1", got, tt.want)
			}
		})
	}
	if rd.Address(phone) == redact.Address(phone) {
		t.Error("the pipeline key gives the process default's tokens")
	}
}
