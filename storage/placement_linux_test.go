package storage_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/onceflow/onceflow/storage"
)

// TestOpenLocalMarksRootTopDir pins the placement hint: OpenLocal on the
// operating system's file system gives its root the top-of-hierarchy
// attribute (chattr +T) where the file system has it, so the folders
// below spread to quiet block groups, and changes nothing else.
func TestOpenLocalMarksRootTopDir(t *testing.T) {
	dir := t.TempDir()
	flags := func() uint32 {
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		f, err := unix.IoctlGetUint32(int(d.Fd()), unix.FS_IOC_GETFLAGS)
		if err != nil {
			t.Skipf("the file system of %s has no inode flags: %v", dir, err)
		}
		return f
	}
	before := flags()
	if _, err := storage.OpenLocal(dir, storage.LocalOptions{}); err != nil {
		t.Fatal(err)
	}
	after := flags()
	const topDir = 0x00020000 // FS_TOPDIR_FL
	if after&topDir == 0 {
		t.Skipf("the file system of %s keeps no top-directory flag (flags %#x)", dir, after)
	}
	if after&^topDir != before&^topDir {
		t.Fatalf("OpenLocal changed the root's flags %#x to %#x, want only the top-directory flag added", before, after)
	}
	// A second open leaves them as they are.
	if _, err := storage.OpenLocal(dir, storage.LocalOptions{}); err != nil {
		t.Fatal(err)
	}
	if again := flags(); again != after {
		t.Fatalf("second OpenLocal changed the flags %#x to %#x", after, again)
	}
}
