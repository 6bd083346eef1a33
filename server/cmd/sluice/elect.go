package main

// sluice elect-leaders: ElectLeaders (KIP-183, KIP-460), as
// kafka-leader-election.sh sends it.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// electOptions are sluice elect-leaders' inputs.
type electOptions struct {
	topic     string // "": every partition of the cluster
	partition int32  // -1: every partition of topic
	unclean   bool   // elect any live replica, even out of the ISR
}

func (o electOptions) typeName() string {
	if o.unclean {
		return "unclean"
	}
	return "preferred"
}

// electLeaders sends ElectLeaders and prints each partition's outcome:
// elected, not needed (informational), or a failure.
func electLeaders(ctx context.Context, a *admin, o electOptions, w io.Writer) error {
	if err := a.supports(ctx, kmsg.ElectLeaders); err != nil {
		return err
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.TimeoutMillis = a.timeoutMillis()
	if o.unclean {
		req.ElectionType = 1
	}
	if o.topic != "" {
		ps := []int32{o.partition}
		if o.partition < 0 {
			st, err := a.describeTopics(ctx, []string{o.topic})
			if err != nil {
				return err
			}
			ps = st.partitionsOf(o.topic)
		}
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = o.topic, ps
		req.Topics = []kmsg.ElectLeadersRequestTopic{rt}
	}
	rctx, cancel := a.ctx(ctx)
	defer cancel()
	resp, err := req.RequestWith(rctx, a.cl)
	if err != nil {
		return fmt.Errorf("ElectLeaders: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("ElectLeaders: %w", err)
	}
	if resp.Version == 0 && o.unclean {
		fmt.Fprintln(w, "Warning: the cluster only knows ElectLeaders v0, which has no election type: it ran a preferred election")
	}
	results := map[tp]error{}
	messages := map[tp]*string{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			results[tp{t.Topic, p.Partition}] = kerr.ErrorForCode(p.ErrorCode)
			messages[tp{t.Topic, p.Partition}] = p.ErrorMessage
		}
	}
	// The new leaders, for the record (best effort: a failure here
	// changes nothing).
	var leaders map[tp]partitionState
	if len(results) > 0 {
		var topics []string
		if o.topic != "" {
			topics = []string{o.topic}
		}
		if st, err := a.describe(ctx, topics); err == nil {
			leaders = st.parts
		}
	}
	var h hints
	elected, notNeeded, failed := 0, 0, 0
	for _, p := range sortedTPs(results) {
		err := results[p]
		switch {
		case err == nil:
			elected++
			if ps, ok := leaders[p]; ok {
				fmt.Fprintf(w, "%s: elected (leader %d)\n", p, ps.leader)
			} else {
				fmt.Fprintf(w, "%s: elected\n", p)
			}
		case errors.Is(err, kerr.ElectionNotNeeded):
			notNeeded++
			fmt.Fprintf(w, "%s: no election needed (%s)\n", p, electionNotNeeded(o))
		default:
			failed++
			err = withMessage(err, messages[p])
			h.note(err)
			fmt.Fprintf(w, "%s: %v\n", p, err)
		}
	}
	h.print(w)
	fmt.Fprintf(w, "%s election: %d elected, %d not needed, %d failed\n", o.typeName(), elected, notNeeded, failed)
	if failed > 0 {
		return errReported
	}
	return nil
}

func electionNotNeeded(o electOptions) string {
	if o.unclean {
		return "it has a leader"
	}
	return "its preferred replica leads"
}
