package kafka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Offsets are offsets by topic and partition: the next offset to read.
// Their JSON form, the first version of the source's position (see
// Position) and the form of WithStartingOffsets(SpecificOffsets(…)), is
//
//	{"payments":{"0":42,"1":17}}
//
// with topics in byte order and partitions in numeric order, so one
// value always encodes to the same bytes.
type Offsets map[string]map[int32]int64

// MarshalJSON encodes o deterministically (see Offsets).
func (o Offsets) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, t := range o.topics() {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteString(":{")
		for j, p := range o.partitions(t) {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			b.WriteString(strconv.FormatInt(int64(p), 10))
			b.WriteString(`":`)
			b.WriteString(strconv.FormatInt(o[t][p], 10))
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ParseOffsets decodes the JSON form of Offsets (a position of version 1).
// Negative offsets are rejected except where allowNegative is set (the
// user's starting offsets, where -2 means earliest and -1 latest).
func ParseOffsets(raw []byte) (Offsets, error) { return parseOffsets(raw, false) }

func parseOffsets(raw []byte, allowNegative bool) (Offsets, error) {
	var m map[string]map[string]int64
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadOffsets, truncate(raw), err)
	}
	o := make(Offsets, len(m))
	for t, ps := range m {
		if t == "" {
			return nil, fmt.Errorf("%w: empty topic name", ErrBadOffsets)
		}
		parts, err := parsePartitions(t, ps, allowNegative)
		if err != nil {
			return nil, err
		}
		o[t] = parts
	}
	return o, nil
}

func parsePartitions(t string, ps map[string]int64, allowNegative bool) (map[int32]int64, error) {
	out := make(map[int32]int64, len(ps))
	for ps, off := range ps {
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%w: topic %q: partition %q is not a partition number", ErrBadOffsets, t, ps)
		}
		if off < 0 && (!allowNegative || off < -2) {
			return nil, fmt.Errorf("%w: topic %q partition %d: offset %d", ErrBadOffsets, t, p, off)
		}
		out[int32(p)] = off
	}
	return out, nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func (o Offsets) topics() []string {
	ts := make([]string, 0, len(o))
	for t := range o {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

func (o Offsets) partitions(t string) []int32 {
	ps := make([]int32, 0, len(o[t]))
	for p := range o[t] {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// get returns the offset of t/p and whether it is present.
func (o Offsets) get(t string, p int32) (int64, bool) {
	off, ok := o[t][p]
	return off, ok
}

func (o Offsets) set(t string, p int32, off int64) {
	if o[t] == nil {
		o[t] = map[int32]int64{}
	}
	o[t][p] = off
}

// list returns every partition in order.
func (o Offsets) list() []topicPartition {
	var out []topicPartition
	for _, t := range o.topics() {
		for _, p := range o.partitions(t) {
			out = append(out, topicPartition{t, p})
		}
	}
	return out
}

func (o Offsets) encode() json.RawMessage {
	b, _ := o.MarshalJSON() // cannot fail: strings and integers only
	return b
}

type topicPartition struct {
	topic     string
	partition int32
}

func (tp topicPartition) String() string { return fmt.Sprintf("%s/%d", tp.topic, tp.partition) }
