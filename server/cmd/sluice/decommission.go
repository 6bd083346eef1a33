package main

// sluice decommission: UnregisterBroker (KIP-500's API; Sluice's
// semantics: a broker that holds replicas is decommissioned first, its
// replicas moved to the other brokers, then it is fenced, and it is
// unregistered once stopped).

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// decommissionOptions are sluice decommission's inputs.
type decommissionOptions struct {
	broker int32
	wait   time.Duration // poll until it is gone for this long; 0: do not wait
}

// decommission sends UnregisterBroker for the broker, prints the answer,
// and with a wait polls Metadata until no partition names the broker
// and it is no longer listed.
func decommission(ctx context.Context, a *admin, o decommissionOptions, w io.Writer) error {
	if err := a.supports(ctx, kmsg.UnregisterBroker); err != nil {
		return err
	}
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = o.broker
	rctx, cancel := a.ctx(ctx)
	defer cancel()
	resp, err := req.RequestWith(rctx, a.cl)
	if err != nil {
		return fmt.Errorf("UnregisterBroker: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("broker %d: %w", o.broker, withMessage(err, resp.ErrorMessage))
	}
	if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
		fmt.Fprintf(w, "broker %d: %s\n", o.broker, *resp.ErrorMessage)
	} else {
		fmt.Fprintf(w, "broker %d: unregistered\n", o.broker)
	}
	if o.wait <= 0 {
		return nil
	}
	deadline := time.Now().Add(o.wait)
	pr := progress{w: w}
	for {
		st, err := a.describe(ctx, nil)
		if err != nil {
			return err
		}
		naming := partitionsNaming(st, o.broker)
		listed := slices.Contains(st.brokers, o.broker)
		if naming == 0 && !listed {
			fmt.Fprintf(w, "broker %d: no partition names it and it is no longer listed; once it is stopped, it is unregistered\n", o.broker)
			return nil
		}
		line := fmt.Sprintf("broker %d: still named by %s", o.broker, partitions(naming))
		if naming == 0 {
			line = fmt.Sprintf("broker %d: no partition names it; still listed", o.broker)
		}
		left := time.Until(deadline)
		if left <= 0 {
			fmt.Fprintf(w, "%s after %v\n", line, o.wait)
			return errReported
		}
		pr.report(line)
		if err := sleepCtx(ctx, min(pollInterval, left)); err != nil {
			return err
		}
	}
}

// partitionsNaming counts the partitions with broker among their
// replicas, ISR or offline replicas, or as their leader.
func partitionsNaming(st *clusterState, broker int32) int {
	n := 0
	for _, p := range st.parts {
		if p.leader == broker || slices.Contains(p.replicas, broker) || slices.Contains(p.isr, broker) || slices.Contains(p.offline, broker) {
			n++
		}
	}
	return n
}
