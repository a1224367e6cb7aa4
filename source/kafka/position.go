package kafka

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// PositionVersion is the version of the position format this package
// writes. Version 1 (Offsets alone) is still read.
const PositionVersion = 2

// Position is the source's serialized offset, stored verbatim as a
// source's start and end in the engine's offsets/N. Version 2, written
// since topic ids were recorded, is
//
//	{"v":2,"topics":{"payments":{"id":"<32 hex digits>","partitions":{"0":42,"1":17},"from":{"1":5}}}}
//
// For each topic: its id ("id", absent when the brokers have no topic ids),
// the next offset to read in each partition ("partitions"), and, in the end
// of the batch that adds them, where the partitions the batch's start does
// not hold (new partitions, new topics, a topic created again) begin
// ("from": the log start offset when the batch was planned). Topics sort
// by name and partitions by number, so one position always has the same
// bytes. Version 1 is the bare Offsets form, without ids or "from"; see
// docs/format/kafka.md.
type Position struct {
	// Version is the format version the position was read in (1 or 2);
	// MarshalJSON always writes PositionVersion.
	Version int
	// Offsets holds the next offset to read of each partition.
	Offsets Offsets
	// TopicIDs holds each topic's id in hex, where known.
	TopicIDs map[string]string
	// From holds the first offset to read of partitions the batch's start
	// does not hold (only in the end of the batch that adds them).
	From Offsets
}

// topicJSON is one topic of a version-2 position.
type topicJSON struct {
	ID         string           `json:"id,omitempty"`
	Partitions map[string]int64 `json:"partitions"`
	From       map[string]int64 `json:"from,omitempty"`
}

// ParsePosition decodes a position of either version. A position of a
// version this build does not know is an error naming the version.
func ParsePosition(raw []byte) (Position, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return Position{}, fmt.Errorf("%w: %q: %v", ErrBadOffsets, truncate(raw), err)
	}
	// A topic named "v" has an object as its value in version 1; a
	// version number is a number.
	v, versioned := probe["v"]
	if !versioned || len(bytes.TrimSpace(v)) == 0 || bytes.TrimSpace(v)[0] == '{' {
		o, err := ParseOffsets(raw)
		if err != nil {
			return Position{}, err
		}
		return Position{Version: 1, Offsets: o, TopicIDs: map[string]string{}, From: Offsets{}}, nil
	}
	var doc struct {
		V      int                  `json:"v"`
		Topics map[string]topicJSON `json:"topics"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return Position{}, fmt.Errorf("%w: %q: %v", ErrBadOffsets, truncate(raw), err)
	}
	if doc.V != PositionVersion {
		return Position{}, fmt.Errorf("%w: position version %d, this build reads versions 1 and %d (a newer onceflow wrote it; run that version)", ErrBadOffsets, doc.V, PositionVersion)
	}
	p := Position{Version: doc.V, Offsets: Offsets{}, TopicIDs: map[string]string{}, From: Offsets{}}
	for t, tj := range doc.Topics {
		if t == "" {
			return Position{}, fmt.Errorf("%w: empty topic name", ErrBadOffsets)
		}
		if tj.ID != "" {
			if b, err := hex.DecodeString(tj.ID); err != nil || len(b) != 16 {
				return Position{}, fmt.Errorf("%w: topic %q: id %q is not 32 hex digits", ErrBadOffsets, t, tj.ID)
			}
			p.TopicIDs[t] = tj.ID
		}
		parts, err := parsePartitions(t, tj.Partitions, false)
		if err != nil {
			return Position{}, err
		}
		p.Offsets[t] = parts
		from, err := parsePartitions(t, tj.From, false)
		if err != nil {
			return Position{}, err
		}
		for q, off := range from {
			end, ok := parts[q]
			if !ok || off > end {
				return Position{}, fmt.Errorf("%w: topic %q partition %d: from %d without a partition offset at or above it", ErrBadOffsets, t, q, off)
			}
			p.From.set(t, q, off)
		}
	}
	return p, nil
}

// MarshalJSON encodes p in version PositionVersion, deterministically (see
// Position). Topics without partitions are left out.
func (p Position) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"v":`)
	b.WriteString(strconv.Itoa(PositionVersion))
	b.WriteString(`,"topics":{`)
	n := 0
	for _, t := range p.Offsets.topics() {
		if len(p.Offsets[t]) == 0 {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		name, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteString(":{")
		if id := p.TopicIDs[t]; id != "" {
			b.WriteString(`"id":"`)
			b.WriteString(id) // hex digits: nothing to escape
			b.WriteString(`",`)
		}
		b.WriteString(`"partitions":`)
		writePartitions(&b, p.Offsets, t)
		if len(p.From[t]) > 0 {
			b.WriteString(`,"from":`)
			writePartitions(&b, p.From, t)
		}
		b.WriteByte('}')
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

func (p Position) encode() json.RawMessage {
	b, _ := p.MarshalJSON() // cannot fail: strings and integers only
	return b
}

// first returns where a batch from start to end (p) begins reading tp: the
// plan's "from" entry, else start's offset when start holds tp under the
// same topic id (or either id is unknown), else 0 (version 1 read a new
// partition from offset 0).
func (p Position) first(start Position, tp topicPartition) int64 {
	if off, ok := p.From.get(tp.topic, tp.partition); ok {
		return off
	}
	if off, ok := start.Offsets.get(tp.topic, tp.partition); ok && sameTopic(start.TopicIDs[tp.topic], p.TopicIDs[tp.topic]) {
		return off
	}
	return 0
}

// sameTopic reports whether two recorded ids may name the same topic: they
// are equal, or one is unknown (a version-1 position, brokers without ids).
func sameTopic(a, b string) bool { return a == "" || b == "" || a == b }

// equalTo reports whether p holds the same offsets as q, no "from"
// entries, and no topic id that differs from one q records.
func (p Position) equalTo(q Position) bool {
	if len(p.From.list()) > 0 || len(p.Offsets.list()) != len(q.Offsets.list()) {
		return false
	}
	for _, tp := range p.Offsets.list() {
		off, ok := q.Offsets.get(tp.topic, tp.partition)
		if !ok || off != p.Offsets[tp.topic][tp.partition] {
			return false
		}
	}
	for t, id := range q.TopicIDs {
		if p.TopicIDs[t] != id {
			return false
		}
	}
	return true
}

func writePartitions(b *bytes.Buffer, o Offsets, t string) {
	b.WriteByte('{')
	for j, q := range o.partitions(t) {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(strconv.FormatInt(int64(q), 10))
		b.WriteString(`":`)
		b.WriteString(strconv.FormatInt(o[t][q], 10))
	}
	b.WriteByte('}')
}
