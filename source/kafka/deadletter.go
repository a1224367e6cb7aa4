package kafka

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers of a dead-letter record.
const (
	HeaderError       = "onceflow-error"        // the decode error
	HeaderSource      = "onceflow-source"       // topic/partition/offset of the original
	HeaderOriginalKey = "onceflow-original-key" // the original key, when it had one
)

type deadLetter struct {
	rec     *kgo.Record
	err     *DecodeError
	topicID [16]byte // of the topic the record was fetched from
}

// deadLetterLine is one line of a dead-letter file (docs/format/kafka.md).
type deadLetterLine struct {
	Version   int    `json:"v"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestampMs"`
	Key       []byte `json:"key"`
	Value     []byte `json:"value"`
	Error     string `json:"error"`
}

// DeadLetterFileName is the file that holds the dead letters of one
// partition range; a re-run of the same range overwrites it.
func DeadLetterFileName(topic string, partition int32, from, to int64) string {
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, topic)
	return fmt.Sprintf("%s-%d-%020d-%020d.jsonl", safe, partition, from, to)
}

// writeDeadLetters logs the dead letters of one partition range and
// writes them to the range's file (WithDeadLetterDir).
func (s *Source) writeDeadLetters(tp topicPartition, from, to int64, dead []deadLetter) error {
	for _, d := range dead {
		s.c.logger.Warn("kafka: value sent to dead letter", "topic", tp.topic, "partition", tp.partition,
			"offset", d.rec.Offset, "error", d.err.Error())
	}
	if err := s.writeDeadLetterFile(tp, from, to, dead); err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.dead += int64(len(dead))
	s.mu.Unlock()
	return nil
}

// writeDeadLetterFile writes the range's file atomically: temp, fsync,
// rename, fsync the directory.
func (s *Source) writeDeadLetterFile(tp topicPartition, from, to int64, dead []deadLetter) error {
	if err := os.MkdirAll(s.c.deadDir, 0o755); err != nil {
		return err
	}
	var buf []byte
	for _, d := range dead {
		line, err := json.Marshal(deadLetterLine{
			Version: 1, Topic: d.rec.Topic, Partition: d.rec.Partition, Offset: d.rec.Offset,
			Timestamp: d.rec.Timestamp.UnixMilli(), Key: d.rec.Key, Value: d.rec.Value, Error: d.err.Error(),
		})
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	name := filepath.Join(s.c.deadDir, DeadLetterFileName(tp.topic, tp.partition, from, to))
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	d, err := os.Open(s.c.deadDir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// deadRecord is the dead-letter record of d: key "topic/partition/offset"
// of the original, its value, timestamp and headers, plus the onceflow
// headers (see the package documentation).
func (s *Source) deadRecord(d deadLetter) *kgo.Record {
	src := d.rec.Topic + "/" + strconv.Itoa(int(d.rec.Partition)) + "/" + strconv.FormatInt(d.rec.Offset, 10)
	r := &kgo.Record{
		Topic:     s.c.deadTopic,
		Key:       []byte(src),
		Value:     d.rec.Value,
		Timestamp: d.rec.Timestamp,
	}
	r.Headers = append(r.Headers, d.rec.Headers...)
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(d.err.Error())},
		kgo.RecordHeader{Key: HeaderSource, Value: []byte(src)},
	)
	if d.rec.Key != nil {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderOriginalKey, Value: d.rec.Key})
	}
	return r
}
