package sesevents_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/provider/sesprovider"
	"github.com/sendonce/sendonce/internal/sesevents"
)

// TestKeysAsTheAdapterSetsThem: the handler reads the key where the SES
// adapter writes it.
func TestKeysAsTheAdapterSetsThem(t *testing.T) {
	if sesevents.TagKey != sesprovider.TagKey || sesevents.HeaderKey != sesprovider.HeaderKey {
		t.Errorf("sesevents reads %s/%s, the adapter writes %s/%s", sesevents.TagKey, sesevents.HeaderKey, sesprovider.TagKey, sesprovider.HeaderKey)
	}
}
