package segment_test

import (
	"fmt"
	"log"
	"os"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Open a partition log, append a record batch, make it durable, and read
// it back.
func Example() {
	dir, err := os.MkdirTemp("", "sluice-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := segment.Open(vfs.Default, dir+"/orders-0", segment.DefaultConfig(), segment.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	// A batch as a producer sends it: two records, no producer id.
	b := batch.Build(batch.NewBuildOptions(), []batch.Record{
		{Timestamp: 1700000000000, Key: []byte("order-1"), Value: []byte("created")},
		{Timestamp: 1700000000001, Key: []byte("order-1"), Value: []byte("paid")},
	})
	base, err := l.Append(b)
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Sync(); err != nil { // durable from here on
		log.Fatal(err)
	}

	data, res, err := l.ReadBytes(nil, base, 1<<20, segment.NoUpperBound)
	if err != nil {
		log.Fatal(err)
	}
	_, recs, err := batch.Records(data)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("offset %d key %s value %s\n", r.Offset, r.Key, r.Value)
	}
	fmt.Println("log end offset", res.LogEndOffset)
	// Output:
	// offset 0 key order-1 value created
	// offset 1 key order-1 value paid
	// log end offset 2
}
