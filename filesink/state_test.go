package filesink

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestParseRecordPrefix checks the fast path agrees with encoding/json on
// the fields it reads, and declines what it cannot read.
func TestParseRecordPrefix(t *testing.T) {
	day := "2026-11-30"
	for _, a := range []Action{
		{Action: ActionAdd, File: File{Path: "day=2026-11-30/part-1.zstd.parquet", Size: 10, Rows: 2, BatchID: 3, Time: -4, Partition: []PartitionValue{{Column: "day", Value: &day}}}},
		{Action: ActionRemove, File: File{Path: "p", Size: 1 << 40, Rows: 0, BatchID: 0, Time: 1796000000000}},
	} {
		line, _ := json.Marshal(a)
		got, ok := parseRecordPrefix(line)
		want := a
		want.Partition, want.Stats = nil, nil
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("parse %s = %+v, %v", line, got, ok)
		}
	}
	for _, line := range []string{
		`{"action":"add","path":"a\u0026b","size":1,"rows":1,"batchId":1,"time":1}`,
		`{"path":"a","action":"add","size":1,"rows":1,"batchId":1,"time":1}`,
		`{"action":"add","path":"a","size":1,"rows":1,"batchId":1,"time":1x}`,
		`{"action":"move","path":"a","size":1,"rows":1,"batchId":1,"time":1}`,
		`{"action":"add","path":"a","size":1,"rows":1,"batchId":1,"time":1`,
	} {
		if a, ok := parseRecordPrefix([]byte(line)); ok {
			t.Errorf("parsed %s as %+v", line, a)
		}
	}
}
