package sendonce

import "github.com/sendonce/sendonce/internal/buildinfo"

// Version returns the version of sendonce in the running binary, from the
// build information Go records: "v0.2.0 go1.26.8" for a released module,
// "(devel) <revision> <time> go1.26.8" in a checkout. `sendonce --version`
// prints it, and each function logs it when it starts.
func Version() string { return buildinfo.Version() }
