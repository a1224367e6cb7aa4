package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
)

func newTestCommand(args ...string) (*Command, *bytes.Buffer) {
	var stderr bytes.Buffer
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &Command{name: "test", fs: fs, args: args, stderr: &stderr}, &stderr
}

func TestParseNamesEveryRequiredFlagWhenOneIsMissing(t *testing.T) {
	tests := map[string]struct {
		required []string
		args     []string
		want     string
	}{
		"one":               {[]string{"input"}, nil, "-input is required"},
		"two":               {[]string{"input", "checkpoint"}, []string{"-input", "x"}, "-input and -checkpoint are required"},
		"three":             {[]string{"input", "lake", "checkpoint"}, []string{"-input", "x", "-checkpoint", "y"}, "-input, -lake and -checkpoint are required"},
		"all given":         {[]string{"input", "checkpoint"}, []string{"-input", "x", "-checkpoint", "y"}, ""},
		"bad trigger after": {nil, []string{"-trigger", "bogus"}, `engine: invalid query: trigger "bogus" is not once, available-now or a duration such as 1s`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := newTestCommand(tc.args...)
			c.fs.String("input", "", "")
			c.fs.String("lake", "", "")
			c.CheckpointFlag("", "")
			c.TriggerFlag()
			err := c.Parse(tc.required...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Parse: %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCloseRunsNewestFirstAndJoinsEveryError(t *testing.T) {
	c, _ := newTestCommand()
	var order []int
	errA, errC := errors.New("a"), errors.New("c")
	c.Defer(func() error { order = append(order, 1); return errA })
	c.Defer(func() error { order = append(order, 2); return nil })
	c.Defer(func() error { order = append(order, 3); return errC })
	err := c.close()
	if want := []int{3, 2, 1}; !slices.Equal(order, want) {
		t.Errorf("close order %v, want %v", order, want)
	}
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Errorf("close: %v, want both a and c", err)
	}
}

func TestLandSaysHowManyFilesItWroteAndNothingWithoutGenerate(t *testing.T) {
	dir := t.TempDir()
	c, stderr := newTestCommand("-generate", "2500")
	c.GenerateFlags("")
	if err := c.Parse(); err != nil {
		t.Fatal(err)
	}
	if err := c.Land(dir); err != nil {
		t.Fatal(err)
	}
	if want := "test: landed 3 generated files in " + dir + "\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}

	c, stderr = newTestCommand()
	c.GenerateFlags("")
	if err := c.Parse(); err != nil {
		t.Fatal(err)
	}
	if err := c.Land(t.TempDir()); err != nil || stderr.Len() != 0 {
		t.Errorf("Land without -generate: %v, stderr %q; want nothing", err, stderr.String())
	}
}
