package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b"}, {Key: "vcs.time", Value: "2026-12-02T01:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"Checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "(devel)"}, Settings: vcs}, "(devel) 1a2b3c4d5e6f+dirty 2026-12-02T01:00:00Z go1.26.8"},
		{"Installed", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "v0.1.0"}}, "v0.1.0 go1.26.8"},
		{"Dependency", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app"}, Deps: []*debug.Module{{Path: "golang.org/x/sync", Version: "v0.1.0"}, {Path: Module, Version: "v0.2.0"}}, Settings: vcs}, "v0.2.0 go1.26.8"},
		{"Replaced", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app"}, Deps: []*debug.Module{{Path: Module, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../sendonce"}}}}, "v0.0.0-00010101000000-000000000000 => ../sendonce go1.26.8"},
		{"Missing", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app"}}, "(devel) go1.26.8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := version(&tc.info); got != tc.want {
				t.Errorf("version = %q, want %q", got, tc.want)
			}
		})
	}
}
