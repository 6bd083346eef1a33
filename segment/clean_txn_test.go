package segment

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// txnRecords is a transactional batch of producer pid with key=value
// records.
func txnRecords(pid int64, kvs ...string) []byte {
	o := batch.NewBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, 0, 0, true
	var recs []batch.Record
	for i := 0; i < len(kvs); i += 2 {
		recs = append(recs, batch.Record{Timestamp: 1, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	return batch.Build(o, recs)
}

// txnMarker is producer pid's end-transaction marker (Kafka's control
// record: key version 0 + type, value version 0 + coordinator epoch).
func txnMarker(pid int64, commit bool) []byte {
	o := batch.NewBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.Control, o.Transactional = pid, 0, true, true
	typ := byte(0)
	if commit {
		typ = 1
	}
	return batch.Build(o, []batch.Record{{Timestamp: 1, Key: []byte{0, 0, 0, typ}, Value: []byte{0, 0, 0, 0, 0, 3}}})
}

// Compaction of transactions (Kafka's LogCleaner rules): an aborted
// transaction's records are removed and never supersede a committed
// record of the same key; committed transactional records compact like
// any; markers stay.
func TestCleanTransactions(t *testing.T) {
	cfg := smallCompactConfig()
	cfg.MinCleanableDirtyRatio = 0
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	plain := func(k, v string) []byte {
		return batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Key: []byte(k), Value: []byte(v)}})
	}
	for _, b := range [][]byte{
		plain("a", "a0"),                        // 0
		txnRecords(7, "a", "aborted", "b", "x"), // 1-2, aborted
		txnRecords(8, "b", "b1"),                // 3, committed
		txnMarker(7, false),                     // 4
		txnRecords(8, "c", "c1"),                // 5
		txnMarker(8, true),                      // 6
	} {
		mustAppend(t, l, b)
	}
	fillKeyed(t, l, 12, 12, "f") // 7-18: distinct keys, rolling segments
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(NoUpperBound); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		off      int64
		kv       string
		ctrl     bool
		producer int64
	}
	var got []rec
	for _, h := range readAll(t, l, 0) {
		if h.BaseOffset > 6 {
			break
		}
		data, rr, err := l.ReadBytes(nil, h.BaseOffset, 1, NoUpperBound)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := batch.Records(data[:h.Size()])
		if err != nil {
			t.Fatal(err)
		}
		if h.Control() {
			got = append(got, rec{h.BaseOffset, "", true, h.ProducerID})
			continue
		}
		for _, r := range recs {
			got = append(got, rec{r.Offset, fmt.Sprintf("%s=%s", r.Key, r.Value), false, h.ProducerID})
		}
	}
	want := []rec{
		{0, "a=a0", false, -1}, // the aborted "a" did not supersede it
		{3, "b=b1", false, 8},
		{4, "", true, 7},
		{5, "c=c1", false, 8},
		{6, "", true, 8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the clean:\n got %v\nwant %v", got, want)
	}
}
