package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// TestLostCheckpoint checks that each example refuses to run a new
// checkpoint (or an older copy of its own) against a sink an earlier
// checkpoint wrote: the new one would
// number batches from 0 again and the sink, which recognises batches by
// id, would skip them as already applied, losing payments silently. The
// sink is left as it was. The refusals come from the sinks' query-id
// checks and the engine's comparison of each sink's newest batch with the
// checkpoint (engine.SinkPosition).
func TestLostCheckpoint(t *testing.T) {
	t.Run("lake", func(t *testing.T) {
		dir := t.TempDir()
		in, lake, cp := filepath.Join(dir, "in"), filepath.Join(dir, "lake"), filepath.Join(dir, "cp")
		l := newLander(t, in, 61)
		l.land(2, 10)
		p := proc{bin: buildProg(t, lakePkg), args: lakeArgs(in, lake, cp)}
		p.mustRun(t, "", 0)
		if err := os.RemoveAll(cp); err != nil {
			t.Fatal(err)
		}
		more := l.land(2, 10)
		o := p.run(t, "", 0)
		const sinkWant = "holds batches up to"
		if o.killed || o.code == 0 || !strings.Contains(o.stderr, sinkWant) {
			t.Fatalf("with a new checkpoint: killed %v, exit %d; want a refusal saying %q:\n%s", o.killed, o.code, sinkWant, o.stderr)
		}
		for _, m := range more {
			delete(l.all, m.PaymentID)
		}
		store, err := storage.OpenLocal(lake, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		checkLake(t, store, l.all)
	})
	t.Run("lake-old-copy", func(t *testing.T) {
		// The same query's checkpoint restored from an older copy: the
		// query id matches, but the lake is a batch ahead of the copy's
		// commits and the copy never planned that batch, so it would
		// replan it with other files and the lake would skip them.
		dir := t.TempDir()
		in, lake, cp, old := filepath.Join(dir, "in"), filepath.Join(dir, "lake"), filepath.Join(dir, "cp"), filepath.Join(dir, "cp-old")
		l := newLander(t, in, 63)
		l.land(1, 10)
		p := proc{bin: buildProg(t, lakePkg), args: []string{"-input", in, "-lake", lake, "-checkpoint", cp, "-trigger", "available-now"}}
		p.mustRun(t, "", 0)
		if err := exec.Command("cp", "-a", cp, old).Run(); err != nil {
			t.Fatal(err)
		}
		l.land(1, 10)
		p.mustRun(t, "", 0)
		if err := os.RemoveAll(cp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(old, cp); err != nil {
			t.Fatal(err)
		}
		more := l.land(1, 10)
		o := p.run(t, "", 0)
		const want = "has applied batch 1, but the checkpoint"
		if o.killed || o.code == 0 || !strings.Contains(o.stderr, want) {
			t.Fatalf("with an older copy of the checkpoint: killed %v, exit %d; want a refusal saying %q:\n%s", o.killed, o.code, want, o.stderr)
		}
		for _, m := range more {
			delete(l.all, m.PaymentID)
		}
		store, err := storage.OpenLocal(lake, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		checkLake(t, store, l.all)
	})
	t.Run("lake-restored", func(t *testing.T) {
		// The lake restored from an older copy: it lacks batches the
		// checkpoint committed, and going on would never write them.
		dir := t.TempDir()
		in, lake, cp, old := filepath.Join(dir, "in"), filepath.Join(dir, "lake"), filepath.Join(dir, "cp"), filepath.Join(dir, "lake-old")
		l := newLander(t, in, 65)
		l.land(2, 10)
		p := proc{bin: buildProg(t, lakePkg), args: lakeArgs(in, lake, cp)}
		p.mustRun(t, "", 0) // batches 0 and 1
		first := map[string]payment{}
		for id, p := range l.all {
			first[id] = p
		}
		if err := exec.Command("cp", "-a", lake, old).Run(); err != nil {
			t.Fatal(err)
		}
		l.land(2, 10)
		p.mustRun(t, "", 0) // batches 2 and 3
		if err := os.RemoveAll(lake); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(old, lake); err != nil {
			t.Fatal(err)
		}
		l.land(1, 10)
		o := p.run(t, "", 0)
		for _, want := range []string{"has applied batches up to 1", "committed batches up to 3", "lost batches 2 to 3", "--from-batch 2"} {
			if o.killed || o.code == 0 || !strings.Contains(o.stderr, want) {
				t.Fatalf("with a lake restored from an older copy: killed %v, exit %d; want a refusal saying %q:\n%s", o.killed, o.code, want, o.stderr)
			}
		}
		store, err := storage.OpenLocal(lake, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		checkLake(t, store, first)
	})
	t.Run("pgtotals", func(t *testing.T) {
		dsn := testenv.PGURL(t)
		dir := t.TempDir()
		in, cp := filepath.Join(dir, "in"), filepath.Join(dir, "cp")
		l := newLander(t, in, 67)
		l.land(2, 10)
		p := proc{bin: buildProg(t, pgtotalsPkg), args: []string{"-input", in, "-checkpoint", cp, "-dsn", dsn, "-job", "lost", "-create-table", "-trigger", "available-now"}}
		p.mustRun(t, "", 0)
		if err := os.RemoveAll(cp); err != nil {
			t.Fatal(err)
		}
		first := map[string]payment{}
		for id, p := range l.all {
			first[id] = p
		}
		l.land(2, 10)
		o := p.run(t, "", 0)
		// The sink's query-id check (it runs before the engine's).
		const sinkWant = "belongs to another query"
		if o.killed || o.code == 0 || !strings.Contains(o.stderr, sinkWant) {
			t.Fatalf("with a new checkpoint: killed %v, exit %d; want a refusal saying %q:\n%s", o.killed, o.code, sinkWant, o.stderr)
		}
		if err := os.RemoveAll(cp); err != nil {
			t.Fatal(err)
		}
		checkTotalsOnly(t, dsn, first)
	})
}
