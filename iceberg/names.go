package iceberg

import (
	"strconv"

	"github.com/google/uuid"
)

// The snapshot summary properties every batch's snapshot carries, and the
// table property that records the newest batch of a query (so a batch
// that wrote no row leaves a trace too). docs/format/iceberg.md.
const (
	PropQueryID = "onceflow.query-id"
	PropBatchID = "onceflow.batch-id"
	// propLastBatchPrefix + query id → newest batch id committed.
	propLastBatchPrefix = "onceflow.last-batch."
)

// writeNamespace seeds the write ids: a fixed UUID, so the ids are the
// same in every process and every version.
var writeNamespace = uuid.MustParse("6f6e6365-666c-6f77-8000-696365626572")

// WriteID is the UUID in the names of batch batchID's data files for query
// queryID: a name-based (SHA-1) UUID of "queryID/batchID". iceberg-go names
// each data file {partition}-{task}-{WriteID}-{n}.parquet, so a replay of
// the batch writes the same names, and maintenance knows the files of the
// batch in flight by their id.
func WriteID(queryID string, batchID int64) uuid.UUID {
	return uuid.NewSHA1(writeNamespace, []byte(queryID+"/"+strconv.FormatInt(batchID, 10)))
}
