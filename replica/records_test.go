package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
)

// The record log: batches the broker appends read back batch by batch,
// from any offset, with a compressed batch's records copied out of
// Iterate's buffer, and an error from fn stopping the scan at the batch it
// refused.
func TestRecordLogScan(t *testing.T) {
	p := openTest(t, testConfig(), Options{})
	ctx := context.Background()
	for i := range 3 { // offsets 0-1, 2-3, 4-5
		first, err := p.AppendRecords(ctx, 1000, AppendOptions{}, []Record{{Key: []byte(fmt.Sprint("k", 2*i)), Value: []byte(fmt.Sprint("v", 2*i))}, {Value: []byte(fmt.Sprint("v", 2*i+1))}})
		if err != nil || first != int64(2*i) {
			t.Fatalf("append %d: first %d, %v", i, first, err)
		}
	}
	// Compressed batches (a producer's), offsets 6-8 and 9-11.
	opts := batch.NewBuildOptions()
	opts.Codec = batch.CodecGzip
	if _, err := produce(t, p, batch.Build(opts, []batch.Record{{Value: []byte("v6")}, {Value: []byte("v7")}, {Value: []byte("v8")}})); err != nil {
		t.Fatal(err)
	}
	if _, err := produce(t, p, batch.Build(opts, []batch.Record{{Value: []byte("w9")}, {Value: []byte("wA")}, {Value: []byte("wB")}})); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		first int64
		vals  string
	}
	var got []seen
	var kept [][]byte // values kept past fn: must not change under later batches
	_, next, err := p.ScanRecords(nil, 3, 100, func(first int64, recs []Record) error {
		s := seen{first: first}
		for _, r := range recs {
			s.vals += string(r.Value) + " "
		}
		got = append(got, s)
		if first >= 6 {
			kept = append(kept, recs[0].Value)
		}
		return nil
	})
	if err != nil || next != 12 {
		t.Fatalf("scan: next %d, %v", next, err)
	}
	want := []seen{{3, "v3 "}, {4, "v4 v5 "}, {6, "v6 v7 v8 "}, {9, "w9 wA wB "}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scan from 3: %v, want %v", got, want)
	}
	if string(kept[0]) != "v6" {
		t.Fatalf("a compressed batch's value aliased a reused buffer: %q", kept[0])
	}
	// A bound inside a batch, and fn's error.
	got = got[:0]
	refuse := errors.New("refused")
	_, next, err = p.ScanRecords(nil, 0, 5, func(first int64, recs []Record) error {
		if first == 4 {
			return refuse
		}
		got = append(got, seen{first: first, vals: fmt.Sprint(len(recs))})
		return nil
	})
	if !errors.Is(err, refuse) || next != 4 {
		t.Fatalf("scan refused at 4: next %d, %v", next, err)
	}
	if want := []seen{{0, "2"}, {2, "2"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scan [0, 5): %v, want %v", got, want)
	}
}
