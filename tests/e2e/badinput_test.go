package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

const goodLine = `{"payment_id":"p-bad-0","merchant_id":"m-00","amount_cents":700,"ts":"2026-11-30T10:00:00.123Z"}`

// badCases are landing files with one bad line (line 2) between good ones.
var badCases = []struct {
	name   string
	line   string // the bad line
	column string // the column the error names, "" for none
	reason string // part of the error's reason
}{
	{"malformed", `{"payment_id":"p-bad-1","merchant_id":"m-00","amount_cents":5,"ts":"2026-11-30T10:00:00.123Z"`, "", "malformed JSON"},
	{"wrong-type", `{"payment_id":"p-bad-1","merchant_id":"m-00","amount_cents":"12x","ts":"2026-11-30T10:00:00.123Z"}`, "amount_cents", `"12x" is not an int64`},
}

// landBad lands good payments and the case's bad file (good line, bad
// line, good line) and returns the good payments.
func landBad(t *testing.T, in string, bad string) *lander {
	l := newLander(t, in, 41)
	l.land(2, 25)
	good2 := strings.Replace(goodLine, "p-bad-0", "p-bad-2", 1)
	l.write("pay-bad.json", []byte(goodLine+"\n"+bad+"\n"+good2+"\n"))
	for _, line := range []string{goodLine, good2} {
		var p payment
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		l.all[p.PaymentID] = p
	}
	return l
}

// TestLakeBadInput checks that a malformed line and a value of the wrong
// type fail the batch with an error naming the file, the line (and the
// column), that the process exits non-zero and nothing is committed, again
// on restart; and that with -dead-letter the bad line lands there with its
// reason and every other payment reaches the lake.
func TestLakeBadInput(t *testing.T) {
	bin := buildProg(t, lakePkg)
	for _, tc := range badCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in")
			l := landBad(t, in, tc.line)
			badFile := filepath.Join(in, "pay-bad.json")

			p := proc{bin: bin, args: []string{"-input", in, "-lake", filepath.Join(dir, "lake"), "-checkpoint", filepath.Join(dir, "cp"), "-trigger", "available-now"}}
			for run := 0; run < 2; run++ {
				o := p.run(t, "", 0)
				if o.killed || o.code == 0 {
					t.Fatalf("run %d: killed %v, exit %d; want a failure:\n%s", run, o.killed, o.code, o.stderr)
				}
				checkInputError(t, o.stderr, badFile, 2, tc.column, tc.reason)
				if n := lastCommit(t, filepath.Join(dir, "cp")); n != -1 {
					t.Errorf("run %d: batch %d committed despite bad input", run, n)
				}
				if v := lakeVersion(t, filepath.Join(dir, "lake")); v != -1 {
					t.Errorf("run %d: the lake has version %d; want nothing committed", run, v)
				}
			}

			dl := filepath.Join(dir, "dead")
			p = proc{bin: bin, args: []string{"-input", in, "-lake", filepath.Join(dir, "lake2"), "-checkpoint", filepath.Join(dir, "cp2"), "-trigger", "available-now", "-dead-letter", dl}}
			p.mustRun(t, "", 0)
			checkDeadLetter(t, dl, badFile, tc.line, tc.column, tc.reason)
			store, err := storage.OpenLocal(filepath.Join(dir, "lake2"), storage.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			checkLake(t, store, l.all)
		})
	}
}

// TestPGTotalsBadInput is TestLakeBadInput for pgtotals: no batch reaches
// the table or the progress row without -dead-letter; with it the totals
// are those of every good payment.
func TestPGTotalsBadInput(t *testing.T) {
	bin := buildProg(t, pgtotalsPkg)
	tc := badCases[1]
	dsn := testenv.PGURL(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	l := landBad(t, in, tc.line)
	badFile := filepath.Join(in, "pay-bad.json")

	p := proc{bin: bin, args: []string{"-input", in, "-checkpoint", filepath.Join(dir, "cp"), "-dsn", dsn, "-job", "bad", "-trigger", "available-now", "-create-table"}}
	o := p.run(t, "", 0)
	if o.killed || o.code == 0 {
		t.Fatalf("killed %v, exit %d; want a failure:\n%s", o.killed, o.code, o.stderr)
	}
	checkInputError(t, o.stderr, badFile, 2, tc.column, tc.reason)
	if n := lastCommit(t, filepath.Join(dir, "cp")); n != -1 {
		t.Errorf("batch %d committed despite bad input", n)
	}

	dl := filepath.Join(dir, "dead")
	p = proc{bin: bin, args: []string{"-input", in, "-checkpoint", filepath.Join(dir, "cp2"), "-dsn", dsn, "-job", "dead", "-trigger", "available-now", "-dead-letter", dl}}
	p.mustRun(t, "", 0)
	checkDeadLetter(t, dl, badFile, tc.line, tc.column, tc.reason)
	checkTotals(t, dsn, "dead", filepath.Join(dir, "cp2"), l.all)
}

// checkInputError checks stderr carries the files source's error for the
// bad line: "files: FILE line N: [column C: ]REASON".
func checkInputError(t *testing.T, stderr, file string, line int, column, reason string) {
	t.Helper()
	want := "files: " + file + " line " + strconv.Itoa(line) + ": "
	if column != "" {
		want += "column " + column + ": "
	}
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, reason) {
		t.Errorf("stderr does not name the bad line as %q … %q:\n%s", want, reason, stderr)
	}
}

// checkDeadLetter checks the dead-letter directory holds exactly the bad
// line, with its file, line 2, column and reason.
func checkDeadLetter(t *testing.T, dir, file, raw, column, reason string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type letter struct {
		File, Column, Reason, Raw string
		Line                      int
	}
	var letters []letter
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var l letter
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			letters = append(letters, l)
		}
	}
	if len(letters) != 1 {
		t.Fatalf("%d dead letters, want 1: %+v", len(letters), letters)
	}
	l := letters[0]
	if l.File != file || l.Line != 2 || l.Column != column || !strings.Contains(l.Reason, reason) || l.Raw != raw {
		t.Errorf("dead letter %+v; want file %s line 2 column %q reason %q raw %s", l, file, column, reason, raw)
	}
}

// lakeVersion returns the lake's newest committed batch, -1 for none.
func lakeVersion(t *testing.T, dir string) int64 {
	t.Helper()
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return -1
	}
	store, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	v, err := filesink.Version(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
