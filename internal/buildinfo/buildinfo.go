// Package buildinfo names the version of sendonce a binary was built
// from, read from the build information Go records in every binary.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Module is sendonce's module path.
const Module = "github.com/sendonce/sendonce"

// Version returns the version of the sendonce module in the running
// binary: "v1.2.3" when it was built as a dependency or installed with go
// install, "(devel)" in a checkout, followed by the VCS revision (with
// "+dirty" for uncommitted changes) and its time when go build recorded
// them, then the Go version. Example: "v0.1.0 go1.26.8", "(devel)
// 1a2b3c4d5e6f+dirty 2026-12-02T01:00:00Z go1.26.8".
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	return version(info)
}

func version(info *debug.BuildInfo) string {
	v := ""
	if info.Main.Path == Module {
		v = info.Main.Version
	} else {
		for _, d := range info.Deps {
			if d.Path == Module {
				v = d.Version
				if d.Replace != nil {
					v += " => " + d.Replace.Path
				}
				break
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	parts := []string{v}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" && info.Main.Path == Module {
		parts = append(parts, rev[:min(12, len(rev))]+dirty)
		if at != "" {
			parts = append(parts, at)
		}
	}
	return strings.Join(append(parts, info.GoVersion), " ")
}
