package checkpoint

import (
	"fmt"

	"github.com/onceflow/onceflow/offsetlog"
)

// The folders and files of a checkpoint.
const (
	// MetadataFile holds the query's Metadata, written once.
	MetadataFile = "metadata"
	// OffsetsDir holds the write-ahead log: one OffsetsEntry per batch.
	OffsetsDir = "offsets"
	// CommitsDir holds one CommitEntry per committed batch.
	CommitsDir = "commits"
	// ProgressDir holds one progress record per batch.
	ProgressDir = "progress"
	// StateRoot holds one statestore folder per stateful operator and
	// partition (see StateDir).
	StateRoot = "state"
	// SourcesRoot holds one folder per source (see SourceDir).
	SourcesRoot = "sources"
)

// OffsetsFile is the object name of batch id's write-ahead entry.
func OffsetsFile(id int64) string { return offsetlog.FileName(OffsetsDir, id) }

// CommitFile is the object name of batch id's commit entry.
func CommitFile(id int64) string { return offsetlog.FileName(CommitsDir, id) }

// ProgressFile is the object name of batch id's progress record.
func ProgressFile(id int64) string { return offsetlog.FileName(ProgressDir, id) }

// OperatorDir is the folder of operator's state: state/<operator>. Its
// partitions' folders are in it, and the bundles of their deltas
// (statestore.Group) in its deltas/ folder.
func OperatorDir(operator string) string { return StateRoot + "/" + operator }

// StateDir is the folder of operator's state in one partition:
// state/<operator>/<partition>.
func StateDir(operator string, partition int) string {
	return fmt.Sprintf("%s/%s/%d", StateRoot, operator, partition)
}

// StoreDir is the folder of one store of operator's state in a partition:
// StateDir for the unnamed store (""), state/<operator>/<partition>/<store>
// for a named one (OperatorConf.Stores).
func StoreDir(operator string, partition int, store string) string {
	if store == "" {
		return StateDir(operator, partition)
	}
	return StateDir(operator, partition) + "/" + store
}

// SourceDir is the folder of source i's own files: sources/<i>.
func SourceDir(i int) string { return fmt.Sprintf("%s/%d", SourcesRoot, i) }
