package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A group request that failed only because a broker could not be dialed
// (a dead seed kgo picked for FindCoordinator) is tried again; any other
// error is returned at once.
func TestRetryDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, dialErr := net.Dial("tcp", addr)
	if dialErr == nil {
		t.Fatal("dialed a closed port")
	}
	wrapped := fmt.Errorf("unable to dial: %w", dialErr)
	shard := &kadm.ShardErrors{Name: "DescribeGroups", Errs: []kadm.ShardError{{Err: wrapped}}}
	for _, tc := range []struct {
		name  string
		fails []error
		calls int
	}{
		{"dial then answer", []error{wrapped, nil}, 2},
		{"shard dial errors then answer", []error{shard, shard, nil}, 3},
		{"another error", []error{errors.New("GROUP_AUTHORIZATION_FAILED")}, 1},
		{"mixed shard errors", []error{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: wrapped}, {Err: errors.New("x")}}}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			calls := 0
			_, err := retryDial(ctx, func() (int, error) {
				err := tc.fails[calls]
				calls++
				return 0, err
			})
			if calls != tc.calls || (err == nil) != (tc.fails[len(tc.fails)-1] == nil) {
				t.Fatalf("calls %d err %v, want %d calls", calls, err, tc.calls)
			}
		})
	}
	// Bounded by ctx: a broker that stays down ends the retries.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := retryDial(ctx, func() (int, error) { return 0, wrapped }); !isDialError(err) {
		t.Fatalf("err %v, want the dial error once ctx ended", err)
	}
}
