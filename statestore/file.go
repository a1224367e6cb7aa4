package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// File envelope (docs/format/state.md has the byte-level description):
//
//	header   24 bytes: magic "OFST", format version u16, kind u8, flags u8,
//	         state version i64, section count u32, 0 u32
//	sections each: body length u64, row count u64, body (an Arrow IPC stream)
//	trailer  8 bytes: CRC-32C (Castagnoli) of every byte before it, u32;
//	         magic "OFST"
//
// All integers are little endian.
const (
	fileMagic         = "OFST"
	formatVersion     = 2 // what this build writes
	oldFormatVersion  = 1 // the oldest it reads: no flags (byte 7 was reserved)
	headerSize        = 24
	sectionHeaderSize = 16
	trailerSize       = 8
	versionDigits     = 20
	schemaFileName    = "schema"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// kind is what a state file holds.
type kind uint8

const (
	kindDelta    kind = 1 // sections: upserts (key+value), deletes (key)
	kindSnapshot kind = 2 // sections: rows (key+value), ascending key order
	kindSchema   kind = 3 // sections: key schema, value schema (no rows)
)

// File flags (header byte 7, format version 2 on).
const (
	// flagFull marks a delta whose upserts are every live row of its
	// version and whose deletes are empty: a load of that version, or a
	// later one, can start from it as from a snapshot.
	flagFull  byte = 1 << 0
	knownFlag      = flagFull
)

func (k kind) String() string {
	switch k {
	case kindDelta:
		return "delta"
	case kindSnapshot:
		return "snapshot"
	case kindSchema:
		return "schema"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (k kind) sections() int {
	if k == kindSnapshot {
		return 1
	}
	return 2
}

// FileName returns the object name of version's delta (snapshot false) or
// snapshot file: the version zero-padded to 20 digits, then ".delta" or
// ".snapshot".
func FileName(version int64, snapshot bool) string {
	k := kindDelta
	if snapshot {
		k = kindSnapshot
	}
	return fileName(version, k)
}

func fileName(version int64, k kind) string {
	s := strconv.FormatInt(version, 10)
	return strings.Repeat("0", max(0, versionDigits-len(s))) + s + "." + k.String()
}

// ParseFileName returns the version and kind a name made by FileName holds;
// ok is false for any other name.
func ParseFileName(name string) (version int64, snapshot bool, ok bool) {
	v, k, ok := parseFileName(name)
	return v, k == kindSnapshot, ok
}

func parseFileName(name string) (int64, kind, bool) {
	num, ext, found := strings.Cut(name, ".")
	if !found || len(num) != versionDigits {
		return 0, 0, false
	}
	var k kind
	switch ext {
	case "delta":
		k = kindDelta
	case "snapshot":
		k = kindSnapshot
	default:
		return 0, 0, false
	}
	for _, r := range num {
		if r < '0' || r > '9' {
			return 0, 0, false
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return v, k, true
}

// section is one Arrow IPC stream of a file: its schema and records.
type section struct {
	schema *arrow.Schema
	recs   []arrow.RecordBatch
}

// encodeFile returns the bytes of a state file. The records' schemas must
// equal their section's schema.
func encodeFile(k kind, version int64, sections []section, mem memory.Allocator) ([]byte, error) {
	return encodeFileTo(nil, k, version, 0, sections, mem)
}

// encodeFileTo is encodeFile writing into dst's memory when it is large
// enough (dst's content is overwritten).
func encodeFileTo(dst []byte, k kind, version int64, flags byte, sections []section, mem memory.Allocator) ([]byte, error) {
	var size int
	for _, s := range sections {
		for _, r := range s.recs {
			for _, c := range r.Columns() {
				size += approxSize(c.Data())
			}
		}
	}
	e := newFileEncoder(dst, len(sections)*(sectionHeaderSize+512)+size+size/8, k, version, flags, len(sections), mem)
	for _, s := range sections {
		e.beginSection(s.schema)
		for _, r := range s.recs {
			if err := e.write(r); err != nil {
				return nil, errors.Join(err, e.abort())
			}
		}
		if err := e.endSection(); err != nil {
			return nil, err
		}
	}
	return e.finish(), nil
}

// fileEncoder writes a state file into memory section by section, record
// by record, so a snapshot's records can be released as soon as they are
// encoded.
type fileEncoder struct {
	buf   *bytes.Buffer
	mem   memory.Allocator
	w     *ipc.Writer // of the open section
	sec   int         // sections begun
	start int         // offset of the open section's header
	rows  int64
}

// newFileEncoder writes the header of a file of n sections into dst's
// memory, grown to hold about sizeHint more bytes.
func newFileEncoder(dst []byte, sizeHint int, k kind, version int64, flags byte, n int, mem memory.Allocator) *fileEncoder {
	buf := bytes.NewBuffer(dst[:0])
	buf.Grow(headerSize + trailerSize + sizeHint)
	var hdr [headerSize]byte
	copy(hdr[0:4], fileMagic)
	binary.LittleEndian.PutUint16(hdr[4:], formatVersion)
	hdr[6] = byte(k)
	hdr[7] = flags
	binary.LittleEndian.PutUint64(hdr[8:], uint64(version))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(n))
	buf.Write(hdr[:])
	return &fileEncoder{buf: buf, mem: mem}
}

// beginSection starts the next section, an Arrow IPC stream of schema.
func (e *fileEncoder) beginSection(schema *arrow.Schema) {
	e.start, e.rows = e.buf.Len(), 0
	var sh [sectionHeaderSize]byte
	e.buf.Write(sh[:])
	e.w = ipc.NewWriter(e.buf, ipc.WithSchema(schema), ipc.WithAllocator(e.mem))
	e.sec++
}

// write appends r (of the section's schema) to the open section.
func (e *fileEncoder) write(r arrow.RecordBatch) error {
	if err := e.w.Write(r); err != nil {
		return fmt.Errorf("encode section %d: %w", e.sec-1, err)
	}
	e.rows += r.NumRows()
	return nil
}

// endSection closes the open section and fills in its header.
func (e *fileEncoder) endSection() error {
	w := e.w
	e.w = nil
	if err := w.Close(); err != nil {
		return fmt.Errorf("encode section %d: %w", e.sec-1, err)
	}
	b := e.buf.Bytes()
	binary.LittleEndian.PutUint64(b[e.start:], uint64(e.buf.Len()-e.start-sectionHeaderSize))
	binary.LittleEndian.PutUint64(b[e.start+8:], uint64(e.rows))
	return nil
}

// abort releases what an unfinished file holds.
func (e *fileEncoder) abort() error {
	if e.w == nil {
		return nil
	}
	w := e.w
	e.w = nil
	return w.Close()
}

// finish appends the trailer and returns the file's bytes.
func (e *fileEncoder) finish() []byte {
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint32(tr[0:], crc32.Checksum(e.buf.Bytes(), castagnoli))
	copy(tr[4:], fileMagic)
	e.buf.Write(tr[:])
	return e.buf.Bytes()
}

// approxSize estimates the bytes of d's rows in a file: for a slice of
// a larger array (a piece of a record split by partition, say), its own
// rows, not the buffers it shares with the other pieces (sizing the
// encoder's buffer by those made every piece of a split as big as the
// whole, and zeroing it).
func approxSize(d arrow.ArrayData) int { return approxRows(d, d.Offset(), d.Len()) }

// approxRows is approxSize of rows [off, off+rows) of d's buffers (off
// counts from the buffers' start, d's own offset included). A list's
// values and a struct's fields are sized over the rows they hold for
// those rows: a slice of a list array shares its whole values array.
func approxRows(d arrow.ArrayData, off, rows int) int {
	bufs := d.Buffers()
	bits := (rows+7)/8 + 8
	switch dt := d.DataType().(type) {
	case arrow.FixedWidthDataType:
		if dt.ID() != arrow.DICTIONARY && dt.ID() != arrow.EXTENSION {
			return bits + rows*dt.BitWidth()/8 + 8
		}
	case *arrow.StringType, *arrow.BinaryType:
		if offs := offsetsOf[int32](bufs, off, rows); offs != nil {
			return bits + 4*(rows+1) + int(offs[rows]-offs[0])
		}
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		if offs := offsetsOf[int64](bufs, off, rows); offs != nil {
			return bits + 8*(rows+1) + int(offs[rows]-offs[0])
		}
	case *arrow.ListType, *arrow.MapType:
		if offs := offsetsOf[int32](bufs, off, rows); offs != nil && len(d.Children()) == 1 {
			c := d.Children()[0]
			return bits + 4*(rows+1) + approxRows(c, c.Offset()+int(offs[0]), int(offs[rows]-offs[0]))
		}
	case *arrow.LargeListType:
		if offs := offsetsOf[int64](bufs, off, rows); offs != nil && len(d.Children()) == 1 {
			c := d.Children()[0]
			return bits + 8*(rows+1) + approxRows(c, c.Offset()+int(offs[0]), int(offs[rows]-offs[0]))
		}
	case *arrow.FixedSizeListType:
		if len(d.Children()) == 1 {
			c, n := d.Children()[0], int(dt.Len())
			return bits + approxRows(c, c.Offset()+off*n, rows*n)
		}
	case *arrow.StructType:
		n := bits
		for _, c := range d.Children() {
			n += approxRows(c, c.Offset()+off, rows)
		}
		return n
	}
	n := 0
	for _, b := range bufs {
		if b != nil {
			n += b.Len()
		}
	}
	for _, c := range d.Children() {
		n += approxSize(c)
	}
	return n
}

// offsetsOf returns the rows+1 offsets of rows [off, off+rows) of a
// variable-width array's buffers, or nil when its offsets buffer does not
// hold them.
func offsetsOf[O int32 | int64](bufs []*memory.Buffer, off, rows int) []O {
	if len(bufs) < 2 || bufs[1] == nil {
		return nil
	}
	all := arrow.GetData[O](bufs[1].Bytes())
	if len(all) < off+rows+1 {
		return nil
	}
	return all[off : off+rows+1]
}

// decodedFile is a state file read back. Release releases its records.
type decodedFile struct {
	kind     kind
	version  int64
	full     bool // a delta with flagFull
	sections []section
}

func (f *decodedFile) release() {
	for _, s := range f.sections {
		for _, r := range s.recs {
			r.Release()
		}
	}
	f.sections = nil
}

// decodeFile checks and decodes data read from file (store URL and name,
// for messages). Every failure is a *CorruptionError.
func decodeFile(file string, data []byte, mem memory.Allocator) (*decodedFile, error) {
	corrupt := func(off int64, format string, args ...any) error {
		return &CorruptionError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return nil, corrupt(-1, "empty file")
	}
	if len(data) < len(fileMagic) || string(data[:len(fileMagic)]) != fileMagic {
		return nil, corrupt(0, "not a state file (bad magic %q, want %q)", data[:min(len(data), len(fileMagic))], fileMagic)
	}
	if len(data) < headerSize+trailerSize {
		return nil, corrupt(int64(len(data)), "file of %d bytes is shorter than a header and trailer (torn write?)", len(data))
	}
	fv := binary.LittleEndian.Uint16(data[4:])
	if fv < oldFormatVersion || fv > formatVersion {
		return nil, corrupt(4, "format version %d is not read by this build (it reads %d to %d)", fv, oldFormatVersion, formatVersion)
	}
	end := len(data) - trailerSize
	if string(data[end+4:]) != fileMagic {
		return nil, corrupt(int64(end+4), "no trailer magic: the file is truncated or was not written whole")
	}
	if want, got := binary.LittleEndian.Uint32(data[end:]), crc32.Checksum(data[:end], castagnoli); want != got {
		return nil, corrupt(int64(end), "checksum mismatch: trailer says %08x, content hashes to %08x", want, got)
	}
	f := &decodedFile{kind: kind(data[6]), version: int64(binary.LittleEndian.Uint64(data[8:]))}
	if f.kind != kindDelta && f.kind != kindSnapshot && f.kind != kindSchema {
		return nil, corrupt(6, "unknown file kind %d", data[6])
	}
	if fv >= 2 { // version 1 reserved byte 7 and wrote 0 there
		flags := data[7]
		if flags&^knownFlag != 0 {
			return nil, corrupt(7, "unknown flags %08b", flags)
		}
		if flags&flagFull != 0 && f.kind != kindDelta {
			return nil, corrupt(7, "a %s is marked full; only a delta can be", f.kind)
		}
		f.full = flags&flagFull != 0
	}
	n := binary.LittleEndian.Uint32(data[16:])
	if int(n) != f.kind.sections() {
		return nil, corrupt(16, "a %s file has %d sections, this one says %d", f.kind, f.kind.sections(), n)
	}
	off := headerSize
	for i := 0; i < int(n); i++ {
		if end-off < sectionHeaderSize {
			return nil, corrupt(int64(off), "section %d header runs past the end of the content", i)
		}
		length := binary.LittleEndian.Uint64(data[off:])
		rows := int64(binary.LittleEndian.Uint64(data[off+8:]))
		body := off + sectionHeaderSize
		if length > uint64(end-body) {
			f.release()
			return nil, corrupt(int64(off), "section %d of %d bytes runs past the end of the content", i, length)
		}
		s, err := readSection(data[body:body+int(length)], mem)
		if err != nil {
			f.release()
			return nil, corrupt(int64(body), "section %d: %v", i, err)
		}
		f.sections = append(f.sections, s)
		var got int64
		for _, r := range s.recs {
			got += r.NumRows()
		}
		if got != rows {
			f.release()
			return nil, corrupt(int64(off+8), "section %d holds %d rows, its header says %d", i, got, rows)
		}
		off = body + int(length)
	}
	if off != end {
		f.release()
		return nil, corrupt(int64(off), "%d unexplained bytes after the last section", end-off)
	}
	if f.full {
		for _, r := range f.sections[1].recs {
			if r.NumRows() > 0 {
				f.release()
				return nil, corrupt(7, "a delta marked full deletes keys")
			}
		}
	}
	return f, nil
}

// readSection decodes one section's Arrow IPC stream. The records share
// body's memory (no copy): they keep it alive until released.
func readSection(body []byte, mem memory.Allocator) (s section, err error) {
	r, err := ipc.NewReaderFromMessageReader(&sliceMessages{data: body}, ipc.WithAllocator(mem))
	if err != nil {
		return s, err
	}
	defer r.Release()
	s.schema = r.Schema()
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			for _, x := range s.recs {
				x.Release()
			}
			return section{}, err
		}
		rec.Retain()
		s.recs = append(s.recs, rec)
	}
	return s, nil
}

// sliceMessages reads the messages of an Arrow IPC stream held in memory,
// each message's body a window on data rather than a copy.
type sliceMessages struct {
	data []byte
	off  int
	msg  *ipc.Message
}

const ipcContinuation = 0xFFFFFFFF

// Message implements ipc.MessageReader.
func (m *sliceMessages) Message() (msg *ipc.Message, err error) {
	defer func() {
		if p := recover(); p != nil { // metadata that the flatbuffer code cannot walk
			msg, err = nil, fmt.Errorf("invalid message metadata at byte %d: %v", m.off, p)
		}
	}()
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
	word := func() (uint32, error) {
		if len(m.data)-m.off < 4 {
			return 0, fmt.Errorf("stream ends inside a message header at byte %d: %w", m.off, io.ErrUnexpectedEOF)
		}
		v := binary.LittleEndian.Uint32(m.data[m.off:])
		m.off += 4
		return v, nil
	}
	n, err := word()
	if err != nil {
		return nil, err
	}
	if n == ipcContinuation {
		if n, err = word(); err != nil {
			return nil, err
		}
	}
	if n == 0 {
		return nil, io.EOF // end of stream
	}
	if n < 4 || int64(n) > int64(len(m.data)-m.off) {
		return nil, fmt.Errorf("message metadata of %d bytes at byte %d does not fit the stream", n, m.off)
	}
	meta := memory.NewBufferBytes(m.data[m.off : m.off+int(n)])
	m.off += int(n)
	probe := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	bodyLen := probe.BodyLen()
	probe.Release()
	if bodyLen < 0 || bodyLen > int64(len(m.data)-m.off) {
		return nil, fmt.Errorf("message body of %d bytes at byte %d does not fit the stream", bodyLen, m.off)
	}
	body := memory.NewBufferBytes(m.data[m.off : m.off+int(bodyLen)])
	m.off += int(bodyLen)
	m.msg = ipc.NewMessage(meta, body)
	return m.msg, nil
}

// Retain implements ipc.MessageReader; the reader owns no counted memory.
func (m *sliceMessages) Retain() {}

// Release implements ipc.MessageReader.
func (m *sliceMessages) Release() {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

// schemasMatch reports whether records of schema got can be stored under
// want: same column names, types and nullability, in order. Metadata is
// not compared.
func schemasMatch(want, got *arrow.Schema) bool {
	if want.NumFields() != got.NumFields() {
		return false
	}
	for i, f := range want.Fields() {
		g := got.Field(i)
		if f.Name != g.Name || f.Nullable != g.Nullable || !arrow.TypeEqual(f.Type, g.Type) {
			return false
		}
	}
	return true
}

// recast returns rec with schema (which schemasMatch accepted), sharing its
// columns; the caller releases the result.
func recast(schema *arrow.Schema, rec arrow.RecordBatch) arrow.RecordBatch {
	if rec.Schema() == schema {
		rec.Retain()
		return rec
	}
	return array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
}
