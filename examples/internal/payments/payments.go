// Package payments is the code the landing-directory examples (lake,
// pgtotals) share: the declared schema of a payment and a deterministic
// generator of landing files. (Whether a checkpoint belongs to its sink is
// the engine's check, engine.SinkPosition, not this package's.) It is
// example code, not part of onceflow's API.
//
// A payment is one JSON object per line of a landing file:
//
//	{"payment_id": "p-…", "merchant_id": "m-…", "amount_cents": 1234, "ts": "2026-11-30T10:00:00.123Z"}
//
// Generated payments are a function of their index alone (no clock, no
// global random source), so two runs of -generate write the same files.
package payments

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Schema is the declared schema of a payment line. Every column is
// required: a line without one of them is bad input.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

// Payment is one payment as it appears in a landing file.
type Payment struct {
	PaymentID   string `json:"payment_id"`
	MerchantID  string `json:"merchant_id"`
	AmountCents int64  `json:"amount_cents"`
	TS          string `json:"ts"`
}

// TSLayout is how generated timestamps are written (RFC 3339, milliseconds).
const TSLayout = "2006-01-02T15:04:05.000Z07:00"

// genStart is the timestamp of generated payment 0; payment i is i·7s
// later, so a few thousand payments span several days (lake partitions).
var genStart = time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)

// Generated returns payment i of the deterministic sequence, with one of
// merchants merchants.
func Generated(i, merchants int) Payment {
	rng := rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))
	if merchants < 1 {
		merchants = 1
	}
	return Payment{
		PaymentID:   fmt.Sprintf("p-%08d", i),
		MerchantID:  fmt.Sprintf("m-%03d", rng.IntN(merchants)),
		AmountCents: 1 + rng.Int64N(99_999),
		TS:          genStart.Add(time.Duration(i)*7*time.Second + time.Duration(rng.IntN(1000))*time.Millisecond).Format(TSLayout),
	}
}

// Encode returns ps as JSON lines.
func Encode(ps []Payment) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range ps {
		_ = enc.Encode(&ps[i]) // a Payment always encodes
	}
	return b.Bytes()
}

// Land writes data as the landing file dir/name the way the files source
// expects: written under a name it never takes (.name.tmp), synced, then
// renamed into place.
func Land(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("land %s: %w", name, err)
	}
	return nil
}

// Generate lands payments 0 … n-1 in dir as files of at most perFile
// payments each, named gen-<first index>.json. A file that already exists
// is left alone (it has the same content), so repeating Generate with the
// same n adds nothing and a larger n adds only the new files. It returns
// how many files it wrote.
func Generate(dir string, n, perFile, merchants int) (int, error) {
	if perFile < 1 {
		perFile = 1000
	}
	wrote := 0
	for first := 0; first < n; first += perFile {
		last := min(first+perFile, n)
		name := fmt.Sprintf("gen-%08d.json", first)
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() {
			continue
		}
		ps := make([]Payment, 0, last-first)
		for i := first; i < last; i++ {
			ps = append(ps, Generated(i, merchants))
		}
		if err := Land(dir, name, Encode(ps)); err != nil {
			return wrote, err
		}
		wrote++
	}
	return wrote, nil
}
