package files

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Regression: a CSV or JSON file that grew after it was taken, its taken
// bytes ending inside a line, had that torn last line parsed as a whole
// row ("7,12" of "7,1250": a payment of 1250 cents read as 12); now the
// read fails, or reads one or two rows of which none is 7|12.
//
// Before the fix: a file is taken with its size at listing time, and a batch reads
// exactly that many bytes, so bytes appended later are never read. When
// the taken bytes end inside a line (a writer that cannot rename, relying
// on WithMinFileAge, paused mid-line longer than the minimum age), the
// torn last line is parsed as a whole one: in CSV "7,12" of "7,1250" is a
// valid row, so a payment of 1250 cents enters as 12 and the rest of the
// line is never read — silently. A taken range whose last line has no
// newline while the file has since grown past it should fail (or stop
// before that line), never be parsed as complete.
func TestTornLastLineOfGrownFileIsNotReadAsARow(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	for _, tc := range []struct {
		format      Format
		name        string
		first, rest string
	}{
		{CSV, "p.csv", "id,amount_cents\n6,500\n7,12", "50\n"},
		{JSON, "p.json", "{\"id\":6,\"amount_cents\":500}\n{\"id\":7,\"amount_cents\":12", "50}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			landing(t, dir, tc.name, tc.first, -time.Hour)
			s := open(t, checkpoint(t), dir, tc.format, schema, WithMinFileAge(time.Minute), WithClock(func() time.Time { return t0 }))
			if k := latest(t, s, -1); k != 0 {
				t.Fatalf("not taken: %d", k)
			}
			f, err := os.OpenFile(filepath.Join(dir, tc.name), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprint(f, tc.rest)
			f.Close()
			got, err := rows(t, s, -1, 0)
			if err != nil {
				return // refusing the torn line is a fix
			}
			for _, r := range got {
				if r == "7|12" {
					t.Fatalf("rows %v: payment 7 of 1250 cents read as 12", got)
				}
			}
			if len(got) != 1 && len(got) != 2 {
				t.Fatalf("rows %v", got)
			}
		})
	}
}
