package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A forwarded answer is sent to the next controller when it says nothing
// was applied for lack of leadership: NOT_CONTROLLER at the top level, or
// in every resource or partition; an answer where some entry succeeded or
// failed otherwise is the client's (sent again, the applied entries would
// fail).
func TestCarriesNotController(t *testing.T) {
	t.Parallel()
	nc := kerr.NotController.Code
	alter := func(codes ...int16) kmsg.Response {
		r := kmsg.NewPtrIncrementalAlterConfigsResponse()
		for _, c := range codes {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ErrorCode = c
			r.Resources = append(r.Resources, rr)
		}
		return r
	}
	reassign := func(top, part int16) kmsg.Response {
		r := kmsg.NewPtrAlterPartitionAssignmentsResponse()
		r.ErrorCode = top
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		rp.ErrorCode = part
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}
	heartbeat := kmsg.NewPtrBrokerHeartbeatResponse()
	heartbeat.ErrorCode = nc
	for _, c := range []struct {
		name string
		resp kmsg.Response
		want bool
	}{
		{"no resources", alter(), false},
		{"resources fine", alter(0, 0), false},
		{"a resource's other error", alter(0, kerr.InvalidConfig.Code), false},
		{"a resource's NOT_CONTROLLER, another applied", alter(0, nc), false},
		{"a resource's NOT_CONTROLLER, another failed", alter(kerr.InvalidConfig.Code, nc), false},
		{"the one resource's NOT_CONTROLLER", alter(nc), true},
		{"every resource's NOT_CONTROLLER", alter(nc, nc), true},
		{"top level", reassign(nc, 0), true},
		{"a partition's", reassign(0, nc), true},
		{"a partition's other error", reassign(0, kerr.UnknownTopicOrPartition.Code), false},
		{"a heartbeat's", heartbeat, true},
		{"a fine heartbeat", kmsg.NewPtrBrokerHeartbeatResponse(), false},
	} {
		if got := carriesNotController(c.resp); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A forwarded admin request that finds no controller before its timeout
// answers REQUEST_TIMED_OUT, as Kafka's ForwardingManager answers a
// request its NodeToControllerChannelManager timed out (onTimeout: the
// request's error response for a TimeoutException); NOT_CONTROLLER stays
// the answer of a node that is not the controller to a request forwarded
// to it. Node 1 of three voters, the other two never started: no
// controller is ever elected. The forward is given a short deadline of
// its own in place of forwardTimeout (the same path: the wait ends).
func TestForwardTimeoutIsRequestTimedOut(t *testing.T) {
	t.Parallel()
	b := startGateNode(t, &logBuffer{}, freePorts(t, 4), 3, 0)
	defer b.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, ok, err := b.forward(ctx, nil, req, nil)
	if !ok || kafkaCode(err) != kerr.RequestTimedOut.Code {
		t.Fatalf("forward without a controller: ok %v, %v (%v); want REQUEST_TIMED_OUT", ok, kerr.ErrorForCode(kafkaCode(err)), err)
	}
}
