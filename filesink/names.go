package filesink

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow/offsetlog"
)

// LogDir is the folder of the table root that holds the commit log.
const LogDir = "_onceflow_log"

const compactSuffix = ".compact"

// FileName returns the base name of the seq-th file (0-based) that batch
// writes for the partition ranked part (0-based) among the batch's
// partition folders, with the extension of codec:
// part-<batch:20>-<part:05>-<seq:05>.<codec>.parquet.
func FileName(batch int64, part, seq int, codec Compression) string {
	return fmt.Sprintf("part-%020d-%05d-%05d%s", batch, part, seq, codec.extension())
}

// ParseFileName parses a base name written by FileName. ok is false for any
// other name, so tools never take a foreign file for one of ours.
func ParseFileName(name string) (batch int64, part, seq int, ok bool) {
	name = path.Base(name)
	rest, found := strings.CutPrefix(name, "part-")
	if !found {
		return 0, 0, 0, false
	}
	stem, ext, found := strings.Cut(rest, ".")
	if !found {
		return 0, 0, 0, false
	}
	switch "." + ext {
	case Zstd.extension(), Snappy.extension(), Uncompressed.extension():
	default:
		return 0, 0, 0, false
	}
	f := strings.Split(stem, "-")
	if len(f) != 3 || len(f[0]) != 20 || len(f[1]) < 5 || len(f[2]) < 5 {
		return 0, 0, 0, false
	}
	var nums [3]int64
	for i, s := range f {
		if strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
			return 0, 0, 0, false
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, 0, false
		}
		nums[i] = v
	}
	return nums[0], int(nums[1]), int(nums[2]), true
}

// deltaName is the log object of batch id: _onceflow_log/<id:20>.
func deltaName(id int64) string { return offsetlog.FileName(LogDir, id) }

// compactName is the compacted log as of batch id: _onceflow_log/<id:20>.compact.
func compactName(id int64) string { return offsetlog.FileName(LogDir, id) + compactSuffix }

// parseLogName tells a log object's batch id and whether it is a compact
// file; ok is false for anything else in the folder.
func parseLogName(name string) (id int64, compact, ok bool) {
	if stem, found := strings.CutSuffix(name, compactSuffix); found {
		id, ok = offsetlog.ParseFileName(LogDir, stem)
		return id, true, ok
	}
	id, ok = offsetlog.ParseFileName(LogDir, name)
	return id, false, ok
}
