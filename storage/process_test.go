package storage_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

// The child process of the cross-process race reads these.
const (
	childLocation = "ONCEFLOW_STORAGE_RACE_LOCATION"
	childID       = "ONCEFLOW_STORAGE_RACE_ID"
	childBarrier  = "ONCEFLOW_STORAGE_RACE_BARRIER"
	childRounds   = "ONCEFLOW_STORAGE_RACE_ROUNDS"
)

func racePayload(id, round int) []byte {
	return []byte(fmt.Sprintf("process %d, round %d\n", id, round))
}

// TestRaceChild is the child of the cross-process put-if-absent races; run
// alone it does nothing.
func TestRaceChild(t *testing.T) {
	location := os.Getenv(childLocation)
	if location == "" {
		t.Skip("the child of TestPutIfAbsentProcesses; runs only when started by it")
	}
	id, _ := strconv.Atoi(os.Getenv(childID))
	rounds, _ := strconv.Atoi(os.Getenv(childRounds))
	barrier := os.Getenv(childBarrier)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := storage.Open(ctx, location, map[string]storage.Opener{"s3": s3store.Open})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Say ready, then wait for the parent's go, so that every child has
	// opened the store (which removes temporary files) before any writes.
	if err := os.WriteFile(filepath.Join(barrier, "ready-"+strconv.Itoa(id)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(barrier, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no go from the parent within 30 s")
		}
	}
	for r := range rounds {
		err := s.PutIfAbsent(ctx, fmt.Sprintf("race/%04d", r), racePayload(id, r))
		switch {
		case err == nil:
			fmt.Printf("RACE %d won\n", r)
		case storage.IsExist(err):
			fmt.Printf("RACE %d lost\n", r)
		default:
			fmt.Printf("RACE %d error %v\n", r, err)
		}
	}
}

// runProcessRace starts children processes racing put-if-absent on the
// same names of the store at location, and checks each name has exactly
// one winner whose bytes are stored.
func runProcessRace(t *testing.T, location string, env []string, s storage.Store) {
	const children, rounds = 6, 20
	barrier := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	type child struct {
		cmd *exec.Cmd
		out *bytes.Buffer
	}
	var cs []child
	for i := range children {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRaceChild$", "-test.count=1", "-test.v")
		cmd.Env = append(append(os.Environ(), env...),
			childLocation+"="+location,
			childID+"="+strconv.Itoa(i),
			childBarrier+"="+barrier,
			childRounds+"="+strconv.Itoa(rounds),
		)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, child{cmd, &out})
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ready, _ := filepath.Glob(filepath.Join(barrier, "ready-*"))
		if len(ready) == children {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d children got ready", len(ready), children)
		}
	}
	if err := os.WriteFile(filepath.Join(barrier, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	winners := make([][]int, rounds)
	for i, c := range cs {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.out)
		}
		sc := bufio.NewScanner(c.out)
		seen := 0
		for sc.Scan() {
			var r int
			var verdict string
			if _, err := fmt.Sscanf(sc.Text(), "RACE %d %s", &r, &verdict); err != nil {
				continue
			}
			seen++
			switch verdict {
			case "won":
				winners[r] = append(winners[r], i)
			case "lost":
			default:
				t.Fatalf("child %d: %s", i, sc.Text())
			}
		}
		if seen != rounds {
			t.Fatalf("child %d reported %d rounds of %d:\n%s", i, seen, rounds, c.out)
		}
	}
	for r, w := range winners {
		if len(w) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", r, w)
		}
		got, err := s.Get(ctx, fmt.Sprintf("race/%04d", r))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, racePayload(w[0], r)) {
			t.Fatalf("round %d: stored %q, want the winner's %q", r, got, racePayload(w[0], r))
		}
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != rounds {
		var names []string
		for _, in := range infos {
			names = append(names, in.Name)
		}
		t.Fatalf("store holds %d objects, want %d: %s", len(infos), rounds, strings.Join(names, " "))
	}
}

// TestPutIfAbsentProcesses races put-if-absent between processes on one
// local directory: link(2) must let exactly one win.
func TestPutIfAbsentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	s, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runProcessRace(t, dir, nil, s)
}

// TestPutIfAbsentProcessesS3 races put-if-absent between processes on one
// S3 bucket, each process with its own client.
func TestPutIfAbsentProcessesS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	loc := testenv.S3Bucket(t)
	s, err := s3store.New(t.Context(), loc.Bucket, "", loc.Options)
	if err != nil {
		t.Fatal(err)
	}
	runProcessRace(t, loc.URL, loc.Env, s)
}
