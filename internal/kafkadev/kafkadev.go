// Package kafkadev starts an embedded Kafka cluster (franz-go's kfake) on a
// loopback port, for tests, the examples and the `onceflow kafka` development
// server. It is not a production broker: data lives in memory unless
// Options.DataDir is set, and a single process owns it.
//
// What the onceflow Kafka source and sink rely on, and kfake implements:
// transactions (InitProducerID with fencing by epoch bump, AddPartitionsToTxn,
// EndTxn, transaction timeouts enforced against transaction.max.timeout.ms),
// read_committed fetches with the last stable offset and aborted-transaction
// lists, ListOffsets by timestamp, DescribeConfigs of broker configs,
// CreateTopics with configs (cleanup.policy=compact), CreatePartitions,
// DeleteRecords and DeleteTopics. Fault injection goes through
// Cluster.Fake().ControlKey.
//
// Lifecycle: Start, use Addrs, Close. A Cluster is safe for concurrent use.
package kafkadev

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configure Start. The zero value starts one broker on a free
// loopback port with no topics.
type Options struct {
	// Port is the TCP port of the first broker on 127.0.0.1; 0 picks a free
	// port. Further brokers take Port+1, Port+2, ... when Port is set.
	Port int
	// Brokers is the number of brokers (default 1).
	Brokers int
	// Topics are created at start: topic name → number of partitions.
	Topics map[string]int32
	// TransactionMaxTimeout is the broker's transaction.max.timeout.ms in
	// milliseconds (default 900000, Kafka's default).
	TransactionMaxTimeoutMs int
	// DataDir, when set, persists the cluster's state there so a restart
	// of the dev server keeps its topics and records.
	DataDir string
	// Extra are further kfake options, passed through last.
	Extra []kfake.Opt
}

// Cluster is a running embedded cluster.
type Cluster struct {
	fake  *kfake.Cluster
	addrs []string
}

// Start starts the cluster. ctx bounds nothing today (kfake starts
// synchronously) and is taken for symmetry with a real dev server.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := o.Brokers
	if n <= 0 {
		n = 1
	}
	if o.Port < 0 || o.Port > 65535-n {
		return nil, fmt.Errorf("kafkadev: port %d out of range", o.Port)
	}
	ports := make([]int, n)
	for i := range ports {
		if o.Port != 0 {
			ports[i] = o.Port + i
		}
	}
	maxTxn := o.TransactionMaxTimeoutMs
	if maxTxn <= 0 {
		maxTxn = 900000
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(n),
		kfake.Ports(ports...), // kfake listens on 127.0.0.1; port 0 is a free port
		kfake.BrokerConfigs(map[string]string{
			"transaction.max.timeout.ms": strconv.Itoa(maxTxn),
		}),
	}
	names := make([]string, 0, len(o.Topics))
	for t := range o.Topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		p := o.Topics[t]
		if p <= 0 {
			return nil, fmt.Errorf("kafkadev: topic %q: partitions %d must be positive", t, p)
		}
		opts = append(opts, kfake.SeedTopics(p, t))
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	opts = append(opts, o.Extra...)
	fake, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkadev: start: %w", err)
	}
	return &Cluster{fake: fake, addrs: fake.ListenAddrs()}, nil
}

// Addrs returns the brokers' host:port addresses (seed brokers for clients).
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Fake returns the underlying kfake cluster, for fault injection
// (ControlKey) and administrative moves in tests.
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// Close stops the cluster. It is safe to call more than once.
func (c *Cluster) Close() { c.fake.Close() }
