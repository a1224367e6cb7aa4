package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"text/tabwriter"
	"time"
)

// versionInfo is what `onceflow version` prints.
type versionInfo struct {
	Module       string `json:"module"`
	Version      string `json:"version"` // "(devel)" for a build from a working tree
	Revision     string `json:"revision,omitempty"`
	RevisionTime string `json:"revisionTime,omitempty"`
	Modified     bool   `json:"modified,omitempty"` // the working tree had uncommitted changes
	GoVersion    string `json:"goVersion"`
}

func versionCommand() *command {
	return &command{
		name: "version", args: outputArgs,
		summary: "print the module, VCS revision and Go versions of this binary",
		setup: func(fs *flag.FlagSet) action {
			out := outputFlag(fs, formatTable, "")
			return func(_ context.Context, _ []string, stdout io.Writer) error {
				bi, ok := debug.ReadBuildInfo()
				if !ok {
					return errors.New("the binary carries no build information (built without module support)")
				}
				v := buildVersion(bi)
				if *out != formatTable {
					return writeJSON(stdout, *out, v)
				}
				return printVersion(stdout, v)
			}
		},
	}
}

// buildVersion reads the module, VCS and Go versions out of bi.
func buildVersion(bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if v.Module == "" {
		v.Module = bi.Path
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.RevisionTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func printVersion(w io.Writer, v versionInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "onceflow\t%s\n", v.Version)
	fmt.Fprintf(tw, "module\t%s\n", v.Module)
	if v.Revision != "" {
		mod := ""
		if v.Modified {
			mod = " (with uncommitted changes)"
		}
		fmt.Fprintf(tw, "revision\t%s%s\n", v.Revision, mod)
	}
	if v.RevisionTime != "" {
		t := v.RevisionTime
		if pt, err := time.Parse(time.RFC3339, t); err == nil {
			t = fmtTime(pt)
		}
		fmt.Fprintf(tw, "committed\t%s\n", t)
	}
	fmt.Fprintf(tw, "go\t%s\n", v.GoVersion)
	return tw.Flush()
}
