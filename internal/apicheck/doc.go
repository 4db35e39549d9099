// Package apicheck holds the test that keeps sendonce's public API
// (PublicPackages) equal to the recorded baseline in api/: it compares
// the packages as they build now with the baseline using
// golang.org/x/exp/apidiff and fails on any change, compatible or not,
// until the change is recorded (make api-baseline) and described in
// CHANGELOG.md. docs/library.md, "Versioning", says how.
package apicheck

// PublicPackages are the packages whose exported API is recorded: what
// a program outside the module can import.
var PublicPackages = []string{
	"github.com/sendonce/sendonce",
	"github.com/sendonce/sendonce/lambdaapp",
	"github.com/sendonce/sendonce/notify",
	"github.com/sendonce/sendonce/provider",
	"github.com/sendonce/sendonce/provider/providertest",
	"github.com/sendonce/sendonce/provider/httpprovider",
	"github.com/sendonce/sendonce/provider/lambdaprovider",
	"github.com/sendonce/sendonce/provider/sesprovider",
	"github.com/sendonce/sendonce/provider/smtpprovider",
	"github.com/sendonce/sendonce/provider/snsprovider",
	"github.com/sendonce/sendonce/provider/twilioprovider",
}
