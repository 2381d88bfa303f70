package config

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// BuildInfo is what a binary says about its own build: what -version
// prints and what its build_info metric carries as labels.
type BuildInfo struct {
	// Version is the main module's version as the go command stamped it:
	// a tag, or a pseudo-version from the commit (with "+dirty" when the
	// checkout had changes) for go build and go install in a checkout;
	// "(devel)" or "unknown" when it had none to stamp (go run, a test).
	Version string
	// Revision is the VCS commit the binary was built from, with
	// "-modified" when the checkout had changes; "unknown" without VCS
	// information (go run, -buildvcs=false, a test).
	Revision string
	// GoVersion is the Go toolchain that built it, such as "go1.26.0".
	GoVersion string
}

// ReadBuildInfo reads the binary's build from runtime/debug.ReadBuildInfo.
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := info.Main.Version; v != "" {
		b.Version = v
	}
	if info.GoVersion != "" {
		b.GoVersion = info.GoVersion
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && b.Revision != "unknown" {
		b.Revision += "-modified"
	}
	return b
}

// String formats b as -version prints it after the binary's name:
// "version=v0.0.0-… revision=… goversion=go1.26.0 linux/amd64".
func (b BuildInfo) String() string {
	return fmt.Sprintf("version=%s revision=%s goversion=%s %s/%s", b.Version, b.Revision, b.GoVersion, runtime.GOOS, runtime.GOARCH)
}
