package testenv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestKafkaReadCommitted(t *testing.T) {
	c := Kafka(t, map[string]int32{"empty": 2, "full": 2})
	if len(stablePartitions(t, c, "empty")) > 0 {
		t.Error("an empty topic reports data")
	}
	if got := KafkaReadCommitted(t, c, "empty", 0); len(got) != 0 {
		t.Errorf("read %d records from an empty topic", len(got))
	}
	KafkaProduce(t, c, &kgo.Record{Topic: "full", Partition: 0, Value: []byte("a")})
	KafkaProduceTxn(t, c, "tx", false, &kgo.Record{Topic: "full", Value: []byte("aborted")})
	KafkaProduceTxn(t, c, "tx", true, &kgo.Record{Topic: "full", Value: []byte("b")})
	if len(stablePartitions(t, c, "full")) == 0 {
		t.Error("a topic with records reports none")
	}
	got := KafkaReadCommitted(t, c, "full", 0)
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	if len(vals) != 2 {
		t.Errorf("read %q, want a and b only", vals)
	}
}
