package server

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The replicated partition's errors reach clients as Kafka's codes, and a
// NotLeaderError carries KIP-951's current-leader hint, wrapped or not.
func TestKafkaCodeReplicationErrors(t *testing.T) {
	notLeader := &replica.NotLeaderError{Leader: 3, Epoch: 7, Reason: "produce goes to the partition leader"}
	noLeader := &replica.NotLeaderError{Leader: 0, Epoch: 7, Reason: "election"}
	for _, tc := range []struct {
		name      string
		err       error
		code      *kerr.Error
		hint      bool
		id, epoch int32
	}{
		{"ErrNotLeader", replica.ErrNotLeader, kerr.NotLeaderForPartition, false, -1, -1},
		{"ErrLeaderNotAvailable", replica.ErrLeaderNotAvailable, kerr.NotLeaderForPartition, false, -1, -1},
		{"ErrNotEnoughReplicas", fmt.Errorf("%w: 1 in sync", replica.ErrNotEnoughReplicas), kerr.NotEnoughReplicas, false, -1, -1},
		{"ErrNotEnoughReplicasAfterAppend", fmt.Errorf("%w: 2 in sync", replica.ErrNotEnoughReplicasAfterAppend), kerr.NotEnoughReplicasAfterAppend, false, -1, -1},
		{"NotLeaderError", notLeader, kerr.NotLeaderForPartition, true, 3, 7},
		{"wrapped NotLeaderError", fmt.Errorf("produce: %w", notLeader), kerr.NotLeaderForPartition, true, 3, 7},
		{"NotLeaderError without a leader", noLeader, kerr.NotLeaderForPartition, true, -1, 7},
	} {
		if got := kafkaCode(tc.err); got != tc.code.Code {
			t.Errorf("%s: kafkaCode %d (%v), want %d (%s)", tc.name, got, kerr.ErrorForCode(got), tc.code.Code, tc.code.Message)
		}
		if msg := errMessage(tc.err); msg == nil || *msg != tc.err.Error() {
			t.Errorf("%s: errMessage %v", tc.name, msg)
		}
		id, epoch, ok := currentLeader(tc.err)
		if ok != tc.hint || id != tc.id || epoch != tc.epoch {
			t.Errorf("%s: currentLeader = %d, %d, %v; want %d, %d, %v", tc.name, id, epoch, ok, tc.id, tc.epoch, tc.hint)
		}
	}
}
