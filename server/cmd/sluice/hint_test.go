package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// hintFor's one-line hints for the errors an operator meets: a refused
// connection (a seed, or another broker that is down), a broker the
// metadata does not have (franz-go's "unknown broker"), a Kafka error
// with a hint, and none for an error it knows nothing about.
func TestHintFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dial tcp 127.0.0.1:9092: %w", syscall.ECONNREFUSED), "is a broker listening there?"},
		{errors.New("broker 3: ListTransactions: unable to dial: dial tcp 127.0.0.1:9096: connect: connection refused"), "a broker the error names"},
		{errors.New("DescribeProducers to broker 3: unknown broker"), "down, fenced or not registered"},
		{kerr.NotEnoughReplicas, "min.insync.replicas"},
		{errors.New("something else"), ""},
	} {
		got := hintFor(tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("hintFor(%v) = %q, want it to say %q", tc.err, got, tc.want)
		}
	}
}
