package sql

import (
	"os"
	"regexp"
	"testing"
)

// The SQL snippets of the READMEs compile.
func TestReadmeSQLCompiles(t *testing.T) {
	env := func(string) (string, bool) { return "127.0.0.1:9092", true }
	for _, f := range []string{"../README.md", "README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1)
		if len(blocks) == 0 {
			t.Fatalf("no SQL snippet in %s", f)
		}
		for _, blk := range blocks {
			if _, err := Compile(blk[1], WithEnv(env)); err != nil {
				t.Errorf("%s: %v\n%s", f, err, blk[1])
			}
		}
	}
}

// The SQL twins of the examples compile.
func TestExamplesCompile(t *testing.T) {
	env := func(string) (string, bool) { return "/tmp/x", true }
	for _, f := range []string{"settlements.sql", "lake.sql", "pgtotals.sql"} {
		b, err := os.ReadFile("../examples/sql/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(string(b), WithEnv(env), WithFile(f)); err != nil {
			t.Error(err)
		}
	}
}
