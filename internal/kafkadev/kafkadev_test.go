package kafkadev

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestStart(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		port int
	}{{"free port", 0}, {"fixed port", freePort(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Start(ctx, Options{Port: tc.port, Topics: map[string]int32{"a": 3, "b": 1}, TransactionMaxTimeoutMs: 120000})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			addrs := c.Addrs()
			if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "127.0.0.1:") {
				t.Fatalf("addrs %v", addrs)
			}
			if tc.port != 0 && addrs[0] != "127.0.0.1:"+strconv.Itoa(tc.port) {
				t.Fatalf("addr %s, want port %d", addrs[0], tc.port)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID("t"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			tds, err := adm.ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(tds["a"].Partitions) != 3 || len(tds["b"].Partitions) != 1 {
				t.Fatalf("topics %v", tds.Names())
			}
			rcs, err := adm.DescribeBrokerConfigs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, rc := range rcs {
				for _, cfg := range rc.Configs {
					if cfg.Key == "transaction.max.timeout.ms" && cfg.Value != nil && *cfg.Value == "120000" {
						found = true
					}
				}
			}
			if !found {
				t.Fatal("transaction.max.timeout.ms not 120000")
			}
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := Start(ctx, Options{Topics: map[string]int32{"x": 0}}); err == nil {
		t.Fatal("zero partitions accepted")
	}
}
