package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsTopDirFlag is FS_TOPDIR_FL (linux/fs.h), chattr's 'T' attribute.
const fsTopDirFlag = 0x00020000

// markTopDir asks the file system to treat dir as the top of a directory
// hierarchy (chattr +T): ext2/3/4's Orlov allocator then places each new
// directory directly below it in a block group of its own choosing, one
// with few directories and many free inodes, instead of the group of dir
// itself. The files a store creates below those directories take their
// inodes there.
//
// Why: creating a file costs what the allocator pays to find a free inode
// in its directory's group. On ext4 without a journal it skips, one by
// one, the inodes freed in the last seconds to minutes, so in a group
// that other programs churn (a shared /tmp where builds and tests create
// and delete thousands of files) one create measured ~100-200 µs of CPU
// against ~8 µs in a quiet group, and a checkpoint creates several files
// a batch.
//
// It is a placement hint and nothing more: what is stored and how is
// unchanged, and where the attribute is unsupported (another file system,
// a directory the process does not own) it is left unset without error.
func markTopDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	defer d.Close()
	fd := int(d.Fd())
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopDirFlag != 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsTopDirFlag))
}
