package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerToClassicConversion: an empty KIP-848 group that a classic
// member joins becomes classic; its consumer records are tombstoned, so a
// replay yields the classic group only.
func TestConsumerToClassicConversion(t *testing.T) {
	log, clk := &memLog{}, newManualClock()
	c := testCoordinator(t, log, clk)
	ctx := context.Background()

	convertToConsumer(t, c) // member m1 joins group g
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version = 1
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "m1", -1
	if r := c.ConsumerGroupHeartbeat(ctx, leave); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", 10000, 10000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	jr := c.JoinGroup(ctx, join)
	if jr.ErrorCode != 0 {
		t.Fatalf("classic join of an empty consumer group: %d", jr.ErrorCode)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 3
	sync.Group, sync.Generation, sync.MemberID = "g", jr.Generation, jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte{0, 0}}}
	if r := c.SyncGroup(ctx, sync); r.ErrorCode != 0 {
		t.Fatalf("sync: %d", r.ErrorCode)
	}

	// The background tombstones land; then a replay knows only the
	// classic group.
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := map[string]bool{}
		for _, r := range log.records() {
			if v := keyVersion(r.Key); v >= firstConsumerKeyV {
				live[string(r.Key)] = r.Value != nil
			}
		}
		left := 0
		for _, alive := range live {
			if alive {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumer group records not tombstoned", left)
		}
		time.Sleep(time.Millisecond)
	}
	c2 := testCoordinator(t, log, clk)
	lg := c2.ListGroups(ctx, kmsg.NewPtrListGroupsRequest())
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "classic" || lg.Groups[0].GroupState != "Stable" {
		t.Fatalf("after replay: %+v", lg.Groups)
	}
}
