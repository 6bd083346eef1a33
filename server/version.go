package server

import (
	"runtime/debug"
	"strings"
	"sync"
)

// The broker's version, as `sluice --version`, the start-up banner and
// the sluice_build_info metric report it.
//
// BaseVersion is the release being worked towards. A build names itself,
// in order of preference:
//
//   - buildVersion, when the build sets it:
//     go build -ldflags "-X github.com/sluicemq/sluice/server.buildVersion=0.1.0"
//   - the module version Go recorded (go install ...@v0.1.0), when it is
//     not "(devel)";
//   - BaseVersion + "-dev", with "+" and the first 12 digits of the
//     commit (buildRevision, or the vcs.revision Go records outside a
//     go.work workspace) and ".dirty" for uncommitted changes, when known.
//
// So a checkout's build prints 0.1.0-dev (0.1.0-dev+0123456789ab.dirty
// when the revision is known), never "(devel)".
const BaseVersion = "0.1.0"

// Set with -ldflags -X (see above); empty by default.
var (
	buildVersion  string // the whole version, e.g. 0.1.0
	buildRevision string // the VCS revision, e.g. $(git rev-parse HEAD), or git describe --always --dirty's
)

// BuildInfo is what a binary knows of its build.
type BuildInfo struct {
	Version   string // e.g. 0.1.0-dev+0123456789ab
	Revision  string // the full VCS revision, or ""
	Time      string // the commit's time (RFC 3339), or ""
	Modified  bool   // built with uncommitted changes
	GoVersion string // e.g. go1.26.8
}

var buildInfo = sync.OnceValue(func() BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return makeBuildInfo(bi, buildVersion, buildRevision)
})

// Build returns this binary's BuildInfo.
func Build() BuildInfo { return buildInfo() }

// Version is this binary's version (BuildInfo.Version).
func Version() string { return buildInfo().Version }

func makeBuildInfo(bi *debug.BuildInfo, version, revision string) BuildInfo {
	out := BuildInfo{Revision: revision}
	if r, ok := strings.CutSuffix(revision, "-dirty"); ok { // git describe --always --dirty
		out.Revision, out.Modified = r, true
	}
	modVersion := ""
	if bi != nil {
		out.GoVersion = bi.GoVersion
		modVersion = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if revision == "" {
					out.Revision = s.Value
				}
			case "vcs.time":
				out.Time = s.Value
			case "vcs.modified":
				out.Modified = out.Modified || s.Value == "true"
			}
		}
	}
	switch {
	case version != "":
		out.Version = version
	case modVersion != "" && modVersion != "(devel)":
		out.Version = strings.TrimPrefix(modVersion, "v")
	default:
		out.Version = BaseVersion + "-dev"
		if rev := out.Revision; rev != "" {
			out.Version += "+" + rev[:min(12, len(rev))]
			if out.Modified {
				out.Version += ".dirty"
			}
		}
	}
	return out
}
