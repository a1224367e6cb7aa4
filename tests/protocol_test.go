package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/onceflow/onceflow/internal/fault"
)

// TestProtocol runs the text scripts under testdata/protocol: each drives
// the crash program (a real process, SIGKILLed at named fault points) and
// prints what the batch protocol left behind, so a protocol change shows
// up as a reviewed text diff. Regenerate the expected output with
//
//	go test ./tests/ -run TestProtocol -rewrite
//
// Commands (one scenario per file; its checkpoint and output start empty):
//
//	prog [mode=aggregate|stateless|windowed|sessions] [rows=N] [per-batch=N] [keys=N]
//	    the program's arguments for the runs that follow
//	run [fault=NAME[@N]]
//	    one run of the program: "exit 0", "killed at NAME" or the error
//	ls checkpoint|out [PREFIX...]
//	    the files below the checkpoint or the sink's output directory
//	cat checkpoint|out PATH
//	    a file, with run ids and wall-clock times masked
//	save checkpoint|out PATH
//	unchanged checkpoint|out PATH
//	    whether the file's bytes are still those save read
//	same-as-clean [repeats-vary]
//	    runs the same program without faults on a fresh checkpoint and
//	    output, and compares every batch file byte for byte; with
//	    repeats-vary the count of repeated attempts is not printed (a
//	    kill inside a background step may or may not catch a batch)
func TestProtocol(t *testing.T) {
	bin := buildProg(t, "github.com/onceflow/onceflow/tests/crashprog")
	datadriven.Walk(t, "testdata/protocol", func(t *testing.T, path string) {
		s := &protocolScript{bin: bin, dir: t.TempDir()}
		s.cp, s.out = filepath.Join(s.dir, "cp"), filepath.Join(s.dir, "out")
		datadriven.RunTest(t, path, s.do)
	})
}

type protocolScript struct {
	bin, dir, cp, out string
	args              []string
	saved             map[string][]byte
}

func (s *protocolScript) do(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "prog":
		s.args = []string{"-rows", "2000", "-per-batch", "500", "-keys", "5"}
		for _, a := range d.CmdArgs {
			v := strings.Join(a.Vals, ",")
			switch a.Key {
			case "mode":
				if v != "aggregate" {
					s.args = append(s.args, "-"+v)
				}
			case "rows", "per-batch", "keys":
				s.args = append(s.args, "-"+a.Key, v)
			default:
				d.Fatalf(t, "prog: unknown argument %q", a.Key)
			}
		}
		return ""
	case "run":
		spec := ""
		if d.HasArg("fault") {
			d.ScanArgs(t, "fault", &spec)
		}
		return s.run(t, s.cp, s.out, spec)
	case "ls":
		root, prefixes := s.root(t, d)
		return listFiles(t, root, prefixes)
	case "cat":
		root, rest := s.root(t, d)
		if len(rest) != 1 {
			d.Fatalf(t, "cat: want one path")
		}
		b, err := os.ReadFile(filepath.Join(root, rest[0]))
		if err != nil {
			return fmt.Sprintf("error: %v\n", errors.Unwrap(err))
		}
		return maskVolatile(string(b), s.dir)
	case "save", "unchanged":
		root, rest := s.root(t, d)
		if len(rest) != 1 {
			d.Fatalf(t, "%s: want one path", d.Cmd)
		}
		b, err := os.ReadFile(filepath.Join(root, rest[0]))
		if err != nil {
			d.Fatalf(t, "%s: %v", d.Cmd, err)
		}
		key := d.CmdArgs[0].Key + "/" + rest[0]
		if d.Cmd == "save" {
			if s.saved == nil {
				s.saved = map[string][]byte{}
			}
			s.saved[key] = b
			return ""
		}
		prev, ok := s.saved[key]
		switch {
		case !ok:
			d.Fatalf(t, "unchanged: %s was not saved", key)
		case bytes.Equal(prev, b):
			return "unchanged\n"
		}
		return "changed:\n" + maskVolatile(string(b), s.dir)
	case "same-as-clean":
		cp, out := filepath.Join(s.dir, "clean-cp"), filepath.Join(s.dir, "clean-out")
		_ = os.RemoveAll(cp)
		_ = os.RemoveAll(out)
		if r := s.run(t, cp, out, ""); r != "exit 0\n" {
			d.Fatalf(t, "clean run: %s", r)
		}
		want, _ := readOut(t, out)
		got, repeats := readOut(t, s.out)
		if len(want) == 0 {
			d.Fatalf(t, "the clean run wrote no batch")
		}
		var diffs []string
		for name, w := range want {
			if g, ok := got[name]; !ok {
				diffs = append(diffs, name+" missing")
			} else if !bytes.Equal(g, w) {
				diffs = append(diffs, name+" differs")
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				diffs = append(diffs, name+" not in the clean run")
			}
		}
		sort.Strings(diffs)
		if len(diffs) > 0 {
			return strings.Join(diffs, "\n") + "\n"
		}
		if d.HasArg("repeats-vary") {
			// A kill inside a background step (a purge beside the next
			// batch) may or may not catch a batch in flight.
			return fmt.Sprintf("identical: %d batches\n", len(want))
		}
		return fmt.Sprintf("identical: %d batches, %d repeated attempts absorbed\n", len(want), repeats)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
		return ""
	}
}

// root resolves the first argument (checkpoint or out) and returns the
// remaining bare arguments.
func (s *protocolScript) root(t *testing.T, d *datadriven.TestData) (string, []string) {
	if len(d.CmdArgs) == 0 {
		d.Fatalf(t, "%s: want checkpoint or out", d.Cmd)
	}
	var rest []string
	for _, a := range d.CmdArgs[1:] {
		rest = append(rest, a.String())
	}
	switch d.CmdArgs[0].Key {
	case "checkpoint":
		return s.cp, rest
	case "out":
		return s.out, rest
	}
	d.Fatalf(t, "%s: want checkpoint or out, not %q", d.Cmd, d.CmdArgs[0].Key)
	return "", nil
}

// run runs the program once and describes how it ended.
func (s *protocolScript) run(t *testing.T, cp, out, spec string) string {
	t.Helper()
	cmd := exec.Command(s.bin, append([]string{"-checkpoint", cp, "-out", out}, s.args...)...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	cmd.Env = append(os.Environ(), fault.EnvVar+"="+spec)
	err := cmd.Run()
	if err == nil {
		return "exit 0\n"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			if m := regexp.MustCompile(`onceflow-fault: (\S+)`).FindStringSubmatch(eb.String()); m != nil {
				return "killed at " + m[1] + "\n"
			}
			return "killed\n"
		}
	}
	lines := strings.Split(strings.TrimSpace(eb.String()), "\n")
	return fmt.Sprintf("%v: %s\n", err, maskVolatile(lines[len(lines)-1], s.dir))
}

// listFiles lists the regular files below root whose relative paths start
// with one of prefixes (all when none), sorted.
func listFiles(t *testing.T, root string, prefixes []string) string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == ".lock" {
			return nil
		}
		if len(prefixes) == 0 {
			names = append(names, rel)
			return nil
		}
		for _, pre := range prefixes {
			if strings.HasPrefix(rel, pre) {
				names = append(names, rel)
				break
			}
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return "(none)\n"
	}
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "(none)\n"
	}
	return strings.Join(names, "\n") + "\n"
}

var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"runId":"[^"]*"`), `"runId":"<run>"`},
	{regexp.MustCompile(`"id":"[0-9a-f]{8}-[0-9a-f-]{27}"`), `"id":"<query>"`},
	{regexp.MustCompile(`"(timestampMs|created|createdMs|timestamp)":("[^"]*"|\d+)`), `"$1":<time>`},
}

// maskVolatile replaces what differs between two runs of the same script
// (run and query ids, wall-clock times, the temporary directory).
func maskVolatile(s, dir string) string {
	s = strings.ReplaceAll(s, dir, "<dir>")
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}
