package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster v2 (KIP-1073) lists a fenced broker, marked IsFenced,
// only when IncludeFencedBrokers asks; v1 and v2 without it list the
// unfenced ones.
func TestClusterDescribeClusterFencedBrokers(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	tc.crash(2) // broker 3: fenced once its session (1.5 s) expires
	cl := tc.direct(0)
	ask := func(version int16, include bool) (live, fenced []int32, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = version
		req.EndpointType = endpointTypeBrokers
		req.IncludeFencedBrokers = include
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, nil, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, nil, err
		}
		for _, b := range resp.Brokers {
			if b.IsFenced {
				fenced = append(fenced, b.NodeID)
			} else {
				live = append(live, b.NodeID)
			}
		}
		return live, fenced, nil
	}
	eventually(t, 20*time.Second, "broker 3 listed as fenced by v2", func() error {
		live, fenced, err := ask(2, true)
		if err != nil {
			return err
		}
		if fmt.Sprint(live) != "[1 2]" || fmt.Sprint(fenced) != "[3]" {
			return fmt.Errorf("v2 with fenced brokers: live %v, fenced %v", live, fenced)
		}
		return nil
	})
	for _, tcase := range []struct {
		version int16
		include bool
	}{{1, false}, {2, false}} {
		live, fenced, err := ask(tcase.version, tcase.include)
		if err != nil || fmt.Sprint(live) != "[1 2]" || len(fenced) != 0 {
			t.Errorf("v%d include=%v: live %v, fenced %v, err %v", tcase.version, tcase.include, live, fenced, err)
		}
	}
}
