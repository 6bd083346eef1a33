package server

import (
	"runtime/debug"
	"testing"
)

// A build names itself by -ldflags, else by the module version Go
// recorded, else BaseVersion-dev with the revision when one is known;
// never "(devel)".
func TestBuildVersion(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tc := range []struct {
		name          string
		bi            *debug.BuildInfo
		version, rev  string
		want, wantRev string
	}{
		{"no build info", nil, "", "", BaseVersion + "-dev", ""},
		{"devel, no vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "", BaseVersion + "-dev", ""},
		{"vcs", vcs("0123456789abcdef0123", "false"), "", "", BaseVersion + "-dev+0123456789ab", "0123456789abcdef0123"},
		{"vcs modified", vcs("0123456789abcdef0123", "true"), "", "", BaseVersion + "-dev+0123456789ab.dirty", "0123456789abcdef0123"},
		{"ldflags revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "abcdef1-dirty", BaseVersion + "-dev+abcdef1.dirty", "abcdef1"},
		{"ldflags version", vcs("0123456789abcdef0123", "false"), "1.2.3", "", "1.2.3", "0123456789abcdef0123"},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "", "", "0.3.0", ""},
	} {
		got := makeBuildInfo(tc.bi, tc.version, tc.rev)
		if got.Version != tc.want || got.Revision != tc.wantRev {
			t.Errorf("%s: version %q revision %q, want %q %q", tc.name, got.Version, got.Revision, tc.want, tc.wantRev)
		}
	}
	if v := Version(); v == "" || v == "(devel)" {
		t.Errorf("Version() = %q", v)
	}
}
