package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

const (
	e2eBrokersEnv    = "KAFKASINK_E2E_BROKERS"
	e2eCheckpointEnv = "KAFKASINK_E2E_CHECKPOINT"
)

var e2eSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us},
}, nil)

// runQuery runs Kafka "in" → engine → Kafka "out" with the AvailableNow
// trigger, five offsets per batch.
func runQuery(ctx context.Context, brokers []string, checkpoint string) (skipped int64, err error) {
	src, err := kafka.New(kafka.WithBrokers(brokers...), kafka.WithTopics("in"), kafka.WithValueJSON(e2eSchema),
		kafka.WithMaxOffsetsPerTrigger(5), kafka.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		return 0, err
	}
	defer src.Close()
	sink, err := kafkasink.New(kafkasink.WithBrokers(brokers...), kafkasink.WithTopic("out"),
		kafkasink.WithKeyColumn("id"), kafkasink.WithValueJSON("id", "amount_cents", "at", "partition", "offset"))
	if err != nil {
		return 0, err
	}
	defer sink.Close()
	store, err := storage.OpenLocal(checkpoint, storage.LocalOptions{})
	if err != nil {
		return 0, err
	}
	q, err := engine.NewQuery(engine.ReadStream(src),
		engine.WithName("kafka-e2e"), engine.WithCheckpoint(store), engine.WithSink(sink),
		engine.WithTrigger(engine.AvailableNow()))
	if err != nil {
		return 0, err
	}
	err = q.Run(ctx)
	return sink.Skipped(), err
}

// TestEngineChild is the child process of TestEngineCrashRecovery.
func TestEngineChild(t *testing.T) {
	brokers := os.Getenv(e2eBrokersEnv)
	if brokers == "" {
		t.Skip("child process of TestEngineCrashRecovery")
	}
	if _, err := runQuery(context.Background(), strings.Split(brokers, ","), os.Getenv(e2eCheckpointEnv)); err != nil {
		t.Fatal(err)
	}
}

func seedInput(t *testing.T, c *kafkadev.Cluster, n int) {
	t.Helper()
	cl := testenv.KafkaClient(t, c)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "in", Value: []byte(fmt.Sprintf(
			`{"id":"p-%02d","amount_cents":%d,"at":"2026-11-30T10:00:%02d.5Z"}`, i, 100*i, i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestEngineCrashRecovery runs a real query process from Kafka to Kafka,
// SIGKILLs it at each sink fault point in its third batch, restarts it on
// the same checkpoint and checks that a read_committed consumer sees every
// input record exactly once.
func TestEngineCrashRecovery(t *testing.T) {
	faulttest.Require(t)
	const n = 23
	for _, point := range []string{"", fault.KafkaSinkAfterProduce + "@3", fault.KafkaSinkAfterCommit + "@3"} {
		name := point
		if name == "" {
			name = "no crash"
		}
		t.Run(name, func(t *testing.T) {
			c := testenv.Kafka(t, map[string]int32{"in": 2, "out": 3})
			seedInput(t, c, n)
			checkpoint := t.TempDir()
			if point != "" {
				cmd := exec.Command(os.Args[0], "-test.run", "^TestEngineChild$", "-test.count", "1")
				cmd.Env = append(os.Environ(), e2eBrokersEnv+"="+strings.Join(c.Addrs(), ","),
					e2eCheckpointEnv+"="+checkpoint, fault.EnvVar+"="+point)
				out, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(out), "onceflow-fault: "+strings.Split(point, "@")[0]) {
					t.Fatalf("child did not die at %s: %v\n%s", point, err, out)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			skipped, err := runQuery(ctx, c.Addrs(), checkpoint)
			if err != nil {
				t.Fatal(err)
			}
			// After a crash past the commit, recovery re-runs batch 2 and
			// the sink finds its marker.
			if want := int64(strings.Count(point, fault.KafkaSinkAfterCommit)); skipped != want {
				t.Errorf("sink skipped %d batches on recovery, want %d", skipped, want)
			}
			counts := map[string]int{}
			for _, r := range testenv.KafkaReadCommitted(t, c, "out", 0) {
				counts[string(r.Key)]++
			}
			for i := range n {
				if k := fmt.Sprintf("p-%02d", i); counts[k] != 1 {
					t.Errorf("%s visible %d times", k, counts[k])
				}
			}
			if len(counts) != n {
				t.Errorf("%d keys visible, want %d", len(counts), n)
			}
		})
	}
}
