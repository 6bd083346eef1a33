package main

// sluice reassign plan|execute|verify|cancel|list: moving partitions
// between brokers with Kafka's APIs (KIP-455 AlterPartitionReassignments
// and ListPartitionReassignments), as kafka-reassign-partitions.sh does.
// The flags are parsed in commands.go; these functions do the work.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// planOptions are sluice reassign plan's inputs.
type planOptions struct {
	topics  []string
	brokers []int32
	rf      int    // 0: each partition's current count
	out     string // if set, the proposal is written there too
}

// reassignPlan prints the topics' current assignment and a proposal
// spreading them over the brokers (plan.go).
func reassignPlan(ctx context.Context, a *admin, o planOptions, w io.Writer) error {
	st, err := a.describeTopics(ctx, o.topics)
	if err != nil {
		return err
	}
	for _, b := range o.brokers {
		if !slices.Contains(st.brokers, b) {
			return fmt.Errorf("broker %d is not in the cluster (its brokers: %s); start it first, it joins empty", b, brokerList(st.brokers))
		}
	}
	var current []assignment
	for _, t := range o.topics {
		for _, p := range st.partitionsOf(t) {
			current = append(current, assignment{Topic: t, Partition: p, Replicas: st.parts[tp{t, p}].replicas})
		}
	}
	proposal, err := planReassignment(current, o.brokers, o.rf)
	if err != nil {
		if errors.Is(err, errPlan) {
			return usageErrorf("%v", err)
		}
		return err
	}
	fmt.Fprintf(w, "Current partition replica assignment\n\n%s\n", formatReassignment(current))
	fmt.Fprintf(w, "Proposed partition reassignment configuration\n\n%s\n", formatReassignment(proposal))
	copies, leaders, total := 0, 0, 0
	replicasOn, leadersOn := map[int32]int{}, map[int32]int{}
	for i, p := range proposal {
		for _, b := range p.Replicas {
			total++
			replicasOn[b]++
			if !slices.Contains(current[i].Replicas, b) {
				copies++
			}
		}
		leadersOn[p.Replicas[0]]++
		if len(current[i].Replicas) == 0 || current[i].Replicas[0] != p.Replicas[0] {
			leaders++
		}
	}
	fmt.Fprintf(w, "The proposal copies %d of its %d replicas and changes the preferred leader of %d of its %d partitions.\n", copies, total, leaders, len(proposal))
	fmt.Fprintf(w, "Replicas per broker: %s; preferred leaders: %s\n", perBroker(o.brokers, replicasOn), perBroker(o.brokers, leadersOn))
	file := "FILE"
	if o.out != "" {
		if err := os.WriteFile(o.out, formatReassignment(proposal), 0o644); err != nil {
			return err
		}
		file = o.out
		fmt.Fprintf(w, "Wrote the proposal to %s\n", o.out)
	}
	fmt.Fprintf(w, "To move: sluice reassign execute --file %s [--throttle BYTES_PER_SEC]\n", file)
	return nil
}

func perBroker(brokers []int32, counts map[int32]int) string {
	var parts []string
	for _, b := range sortedIDs(brokers) {
		parts = append(parts, fmt.Sprintf("%d:%d", b, counts[b]))
	}
	return strings.Join(parts, " ")
}

// executeOptions are sluice reassign execute's inputs.
type executeOptions struct {
	file       string // for the messages
	throttle   int64  // bytes/s; 0: no throttle
	additional bool   // start even while other reassignments run
}

// reassignExecute starts moving every partition of plan: it prints the
// current assignment (to roll back with), sets the throttle if asked,
// then sends AlterPartitionReassignments.
func reassignExecute(ctx context.Context, a *admin, plan []assignment, o executeOptions, w io.Writer) error {
	if err := a.supports(ctx, kmsg.AlterPartitionAssignments); err != nil {
		return err
	}
	if o.throttle > 0 {
		if err := a.supports(ctx, kmsg.IncrementalAlterConfigs); err != nil {
			return err
		}
	}
	st, err := a.describeTopics(ctx, topicsOf(plan))
	if err != nil {
		return err
	}
	var current []assignment
	currentOf := map[tp][]int32{}
	for _, p := range plan {
		ps, ok := st.parts[p.tp()]
		if !ok {
			return fmt.Errorf("partition %s: %w; nothing was changed", p.tp(), kerr.UnknownTopicOrPartition)
		}
		current = append(current, assignment{Topic: p.Topic, Partition: p.Partition, Replicas: ps.replicas})
		currentOf[p.tp()] = ps.replicas
	}
	ongoing, err := a.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	if len(ongoing) > 0 && !o.additional {
		what := fmt.Sprintf("%d partition reassignments are", len(ongoing))
		if len(ongoing) == 1 {
			what = "1 partition reassignment is"
		}
		return fmt.Errorf("%s in progress (sluice reassign list); wait for them (sluice reassign verify), cancel them, or give --additional to start these as well; nothing was changed", what)
	}
	fmt.Fprintf(w, "Current partition replica assignment\n\n%s\n", formatReassignment(current))
	fmt.Fprintf(w, "Save this to use as the --file of sluice reassign execute to roll back\n\n")
	if o.throttle > 0 {
		th := planThrottle(plan, currentOf, ongoing)
		for _, b := range th.brokers {
			if !slices.Contains(st.brokers, b) {
				return fmt.Errorf("throttle: broker %d is not in the cluster (its brokers: %s), so its rate cannot be set; start it, or run without --throttle; nothing was changed", b, brokerList(st.brokers))
			}
		}
		if err := applyThrottle(ctx, a, th, o.throttle, w); err != nil {
			return fmt.Errorf("%w; no reassignment was started (the throttle may be partly set: sluice reassign verify --file %s removes it once nothing moves)", err, o.file)
		}
		fmt.Fprintf(w, "Warning: run sluice reassign verify --file %s until every partition is complete: that removes the throttle.\n\n", o.file)
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range plan {
		req.Assign(p.Topic, p.Partition, p.Replicas)
	}
	rctx, cancel := a.ctx(ctx)
	defer cancel()
	rs, err := a.adm.AlterPartitionAssignments(rctx, req)
	if err != nil {
		return fmt.Errorf("AlterPartitionReassignments: %w", unwrapKadm(err))
	}
	var h hints
	failed := 0
	for _, p := range plan {
		r, ok := rs[p.Topic][p.Partition]
		switch {
		case !ok:
			failed++
			fmt.Fprintf(w, "%s: no answer for this partition\n", p.tp())
		case r.Err != nil:
			failed++
			err := withMessage(r.Err, &r.ErrMessage)
			h.note(err)
			fmt.Fprintf(w, "%s: %v\n", p.tp(), err)
		case slices.Equal(currentOf[p.tp()], p.Replicas):
			fmt.Fprintf(w, "%s: accepted (replicas %s unchanged)\n", p.tp(), joinInts(p.Replicas, ","))
		default:
			fmt.Fprintf(w, "%s: started: %s -> %s\n", p.tp(), joinInts(currentOf[p.tp()], ","), joinInts(p.Replicas, ","))
		}
	}
	h.print(w)
	if failed > 0 {
		fmt.Fprintf(w, "%d of %d partitions failed to start\n", failed, len(plan))
		return errReported
	}
	fmt.Fprintf(w, "Started the reassignment of %d partitions; follow it with sluice reassign verify --file %s\n", len(plan), o.file)
	return nil
}

// unwrapKadm turns kadm's *ErrAndMessage into ours, so the error prints
// as NAME: message.
func unwrapKadm(err error) error {
	var em *kadm.ErrAndMessage
	if errors.As(err, &em) {
		return withMessage(em.Err, &em.ErrMessage)
	}
	return err
}

// checkState is how a partition of a file stands.
type checkState int

const (
	checkComplete checkState = iota // Metadata's replicas are the file's, nothing moving
	checkMoving                     // ListPartitionReassignments lists it
	checkMismatch                   // not moving, but not on the file's replicas
	checkMissing                    // the cluster does not know it
)

type partitionCheck struct {
	want    assignment
	state   checkState
	current []int32
	moving  reassignment
	err     error
}

// inspect checks every partition of plan against the cluster.
func inspect(ctx context.Context, a *admin, plan []assignment) ([]partitionCheck, error) {
	var parts []tp
	for _, p := range plan {
		parts = append(parts, p.tp())
	}
	moving, err := a.listReassignments(ctx, parts)
	if err != nil {
		return nil, err
	}
	st, err := a.describe(ctx, topicsOf(plan))
	if err != nil {
		return nil, err
	}
	var out []partitionCheck
	for _, p := range plan {
		c := partitionCheck{want: p}
		ps, known := st.parts[p.tp()]
		r, isMoving := moving[p.tp()]
		switch {
		case isMoving:
			c.state, c.moving, c.current = checkMoving, r, r.replicas
		case !known:
			c.state, c.err = checkMissing, kerr.UnknownTopicOrPartition
			if terr := st.topics[p.Topic]; terr != nil {
				c.err = terr
			}
		case slices.Equal(ps.replicas, p.Replicas):
			c.state, c.current = checkComplete, ps.replicas
		default:
			c.state, c.current = checkMismatch, ps.replicas
		}
		out = append(out, c)
	}
	return out, nil
}

func countStates(cs []partitionCheck) map[checkState]int {
	n := map[checkState]int{}
	for _, c := range cs {
		n[c.state]++
	}
	return n
}

func (c partitionCheck) String() string {
	p := c.want.tp()
	switch c.state {
	case checkComplete:
		return fmt.Sprintf("%s: complete (replicas %s)", p, joinInts(c.current, ","))
	case checkMoving:
		return fmt.Sprintf("%s: in progress: replicas %s, adding %s, removing %s", p,
			joinInts(c.moving.replicas, ","), brokerList(c.moving.adding), brokerList(c.moving.removing))
	case checkMismatch:
		return fmt.Sprintf("%s: mismatch: no reassignment in progress, but the replicas are %s, not the file's %s", p,
			joinInts(c.current, ","), joinInts(c.want.Replicas, ","))
	}
	return fmt.Sprintf("%s: %v", p, c.err)
}

// verifyOptions are sluice reassign verify's inputs.
type verifyOptions struct {
	wait              time.Duration // poll until complete for this long; 0: look once
	preserveThrottles bool
}

// reassignVerify reports each partition of plan; once all are complete
// it removes the throttle. It fails unless all are complete.
func reassignVerify(ctx context.Context, a *admin, plan []assignment, o verifyOptions, w io.Writer) error {
	deadline := time.Now().Add(o.wait)
	pr := progress{w: w}
	var checks []partitionCheck
	for {
		var err error
		checks, err = inspect(ctx, a, plan)
		if err != nil {
			return err
		}
		n := countStates(checks)
		left := time.Until(deadline)
		if n[checkComplete] == len(plan) || left <= 0 {
			break
		}
		pr.report(fmt.Sprintf("%d of %d partitions complete, %d in progress, %d mismatched, %d missing",
			n[checkComplete], len(plan), n[checkMoving], n[checkMismatch], n[checkMissing]))
		if err := sleepCtx(ctx, min(pollInterval, left)); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "Status of partition reassignment:")
	var h hints
	for _, c := range checks {
		fmt.Fprintln(w, c)
		if c.err != nil {
			h.note(c.err)
		}
	}
	h.print(w)
	n := countStates(checks)
	if n[checkComplete] != len(plan) {
		fmt.Fprintf(w, "%d of %d partitions are not complete", len(plan)-n[checkComplete], len(plan))
		if o.wait > 0 {
			fmt.Fprintf(w, " after %v", o.wait)
		}
		fmt.Fprintln(w)
		return errReported
	}
	fmt.Fprintf(w, "All %d partitions are complete.\n", len(plan))
	if o.preserveThrottles {
		return nil
	}
	return clearThrottles(ctx, a, topicsOf(plan), w)
}

// reassignCancel cancels the reassignment of parts (AlterPartitionReassignments
// with null replicas: each goes back to the replicas it had), then removes
// the throttle unless preserveThrottles.
func reassignCancel(ctx context.Context, a *admin, parts []tp, preserveThrottles bool, w io.Writer) error {
	if err := a.supports(ctx, kmsg.AlterPartitionAssignments); err != nil {
		return err
	}
	var req kadm.AlterPartitionAssignmentsReq
	var topics []string
	for _, p := range parts {
		req.CancelAssign(p.Topic, p.Partition)
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
		}
	}
	slices.Sort(topics)
	rctx, cancel := a.ctx(ctx)
	defer cancel()
	rs, err := a.adm.AlterPartitionAssignments(rctx, req)
	if err != nil {
		return fmt.Errorf("AlterPartitionReassignments: %w", unwrapKadm(err))
	}
	var h hints
	failed, cancelled := 0, 0
	for _, p := range parts {
		r, ok := rs[p.Topic][p.Partition]
		switch {
		case !ok:
			failed++
			fmt.Fprintf(w, "%s: no answer for this partition\n", p)
		case r.Err == nil:
			cancelled++
			fmt.Fprintf(w, "%s: cancelled\n", p)
		case errors.Is(r.Err, kerr.NoReassignmentInProgress):
			fmt.Fprintf(w, "%s: no reassignment in progress (nothing to cancel)\n", p)
		default:
			failed++
			err := withMessage(r.Err, &r.ErrMessage)
			h.note(err)
			fmt.Fprintf(w, "%s: %v\n", p, err)
		}
	}
	h.print(w)
	fmt.Fprintf(w, "Cancelled %d of %d partitions' reassignments\n", cancelled, len(parts))
	if cancelled > 0 {
		// On Sluice a cancel is a move back: the replicas it had added
		// leave raft before the partition is done (on Kafka it is done at
		// once). Wait for that, so the throttle is removed after it.
		waitCancelled(ctx, a, parts, cancelMoveBackWait, w)
	}
	if !preserveThrottles {
		if err := clearThrottles(ctx, a, topics, w); err != nil {
			return err
		}
	}
	if failed > 0 {
		return errReported
	}
	return nil
}

// cancelMoveBackWait bounds how long cancel waits for the cancelled
// partitions to be listed no more.
const cancelMoveBackWait = time.Minute

// waitCancelled polls ListPartitionReassignments until none of parts is
// listed in progress or d passes, saying so once when it must wait.
func waitCancelled(ctx context.Context, a *admin, parts []tp, d time.Duration, w io.Writer) {
	deadline := time.Now().Add(d)
	said := false
	for {
		moving, err := a.listReassignments(ctx, parts)
		if err != nil || len(moving) == 0 {
			return
		}
		if !said {
			fmt.Fprintf(w, "Waiting for %d cancelled partition(s) to finish moving back (their added replicas leave first)\n", len(moving))
			said = true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(w, "%d partition(s) still moving back after %v\n", len(moving), d)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reassignList prints every reassignment in progress.
func reassignList(ctx context.Context, a *admin, w io.Writer) error {
	moving, err := a.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	if len(moving) == 0 {
		fmt.Fprintln(w, "No partition reassignments in progress.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING")
	for _, p := range sortedTPs(moving) {
		r := moving[p]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, joinInts(r.replicas, ","), orNone(r.adding), orNone(r.removing))
	}
	return tw.Flush()
}

func orNone(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	return joinInts(ids, ",")
}
