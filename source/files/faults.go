package files

// Named fault points (see internal/fault) at the source's own boundaries.
const (
	// FaultAfterLog: files log entry k is durable, LatestOffset has not
	// returned it (so the engine's WAL cannot hold it).
	FaultAfterLog = "files-after-log"
	// FaultMidCleanup: the first file of a committed batch was archived or
	// deleted, the others not, and the cleanup record not advanced.
	FaultMidCleanup = "files-mid-cleanup"
	// FaultAfterCompact: compact/<c> is durable, none of the entries it
	// covers deleted yet.
	FaultAfterCompact = "files-after-compact"
	// FaultAfterLogPurge: the plain entries compact/<c> covers were
	// deleted, the older compact entries not.
	FaultAfterLogPurge = "files-after-log-purge"
)

// FaultPoints returns the names of the package's fault points.
func FaultPoints() []string {
	return []string{FaultAfterLog, FaultMidCleanup, FaultAfterCompact, FaultAfterLogPurge}
}
