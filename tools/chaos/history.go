package chaos

import (
	"fmt"
	"time"
)

// A history is what the runner's clients did and saw, as Jepsen records
// it: every operation with when it was invoked and when it completed
// (times since the run's start), what it asked and what it got. The
// checker (check.go) and the report (report.go) read only this, so a
// history saved as JSON (history.json in the run's folder) can be checked
// again without a cluster.

// OpKind is what an operation did.
type OpKind string

const (
	// OpSend is one produce (an idempotent acks=all franz-go producer):
	// Topic, Partition, Key, Value; on OK, Offset is where the broker
	// acknowledged it.
	OpSend OpKind = "send"
	// OpPoll is one consumer poll: Records, in the order the client
	// returned them. Always OK.
	OpPoll OpKind = "poll"
	// OpAssign is a consumer's assignment changing (a rebalance): from
	// End on, it owns Partitions of Topic. A consumer's position in a
	// partition it did not own before may start anywhere (its group's
	// committed offset), so the poll checks restart there. Always OK.
	OpAssign OpKind = "assign"
	// OpCommit is an OffsetCommit of Offsets (partition: the next offset
	// to consume) for Group.
	OpCommit OpKind = "commit"
	// OpFetchOffsets is an OffsetFetch of Group: Offsets is what it
	// returned (partitions without a committed offset are absent).
	OpFetchOffsets OpKind = "fetch-offsets"
	// OpAppend is the log workload's produce of Value to Partition; on
	// OK, Offset is its offset.
	OpAppend OpKind = "append"
	// OpRead is the log workload's read of Partition from offset 0 to its
	// high watermark: Values is the whole log as read (Offset = len).
	OpRead OpKind = "read"
	// OpHighWater is one request reading high watermarks of Topic,
	// sent to the partition's leader as the client's metadata names it:
	// Via is "Fetch" (one partition, Partition; the response's
	// HighWatermark) or "ListOffsets" (every partition; latest, read
	// uncommitted). Offsets is partition: high watermark, for the
	// partitions answered without an error. OK when at least one was,
	// else Fail (a read changes nothing).
	OpHighWater OpKind = "high-watermark"
	// OpTxn is one transaction of a transactional producer (the txn
	// workload), from BeginTransaction to EndTransaction's answer: Value
	// is its name (TxnName), Records what it produced in the order
	// produced (Offset where the broker acknowledged each, -1 when it
	// did not), Txn what EndTransaction was asked (TxnCommit or
	// TxnAbort; empty when it was never called). OK: EndTransaction
	// answered, so the transaction is committed or aborted as asked;
	// Info: it may have ended either way; Fail: EndTransaction was
	// never sent, so it did not commit. A consume-transform-produce
	// transaction (process "ctp-<i>") also has Group, its consumer
	// group, and Read, what its read_committed poll in that group
	// returned before it began (in the order returned); the group's
	// offsets past Read are committed in the transaction
	// (TxnOffsetCommit).
	OpTxn OpKind = "txn"
)

// What an OpTxn asked EndTransaction (Op.Txn).
const (
	TxnCommit = "commit"
	TxnAbort  = "abort"
)

// The requests an OpHighWater reads high watermarks with (Op.Via).
const (
	ViaFetch       = "Fetch"
	ViaListOffsets = "ListOffsets"
)

// Outcome is how an operation ended, in Jepsen's terms.
type Outcome string

const (
	// OK: it happened, and Offset/Records/Offsets say what it saw.
	OK Outcome = "ok"
	// Fail: it certainly did not happen (the broker refused it before
	// writing anything, or the client never sent it).
	Fail Outcome = "fail"
	// Info: it may or may not have happened (a timeout, a lost
	// connection, the run ended first). End is when the client gave up.
	Info Outcome = "info"
)

// Record is one record as a client saw it.
type Record struct {
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v"`
}

func (r Record) String() string { return fmt.Sprintf("p%d@%d=%q", r.Partition, r.Offset, r.Value) }

// Op is one operation of a client.
type Op struct {
	// Process names the client (a producer, a consumer, an offsets
	// client): "producer-0", "consumer-2", ... A process's operations do
	// not overlap in time, except sends (a producer pipelines).
	Process string `json:"process"`
	Kind    OpKind `json:"f"`
	// Start is when the operation was invoked, End when it completed;
	// since the run's start. End is zero for an operation that never
	// completed (Outcome Info).
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Outcome is OK, Fail or Info.
	Outcome Outcome `json:"type"`

	Topic     string          `json:"topic,omitempty"`
	Group     string          `json:"group,omitempty"`
	Partition int32           `json:"partition"`
	Key       string          `json:"key,omitempty"`
	Value     string          `json:"value,omitempty"`
	Offset    int64           `json:"offset"`
	Records   []Record        `json:"records,omitempty"`
	Values    []string        `json:"values,omitempty"`
	Read      []Record        `json:"read,omitempty"` // OpTxn: what a consume-transform-produce transaction read
	Offsets   map[int32]int64 `json:"offsets,omitempty"`
	Parts     []int32         `json:"partitions,omitempty"`
	Via       string          `json:"via,omitempty"` // OpHighWater: ViaFetch or ViaListOffsets
	Txn       string          `json:"txn,omitempty"` // OpTxn: TxnCommit, TxnAbort or empty
	Err       string          `json:"error,omitempty"`
}

// Fault is one injected fault, from when it was injected to when it was
// healed (End zero: it lasted to the end of the fault phase).
type Fault struct {
	Kind  string        `json:"kind"` // the nemesis kind: FaultKillLeader, FaultPause, FaultBridge, ...
	Nodes []int         `json:"nodes"`
	What  string        `json:"what"` // a line for people: "SIGKILL node 2 (leader of queue/0)"
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Down are the nodes the fault stops (paused or killed) while it
	// lasts; Sides, for a network fault, the components it splits the
	// nodes into (three for a bridge: the middle one reaches both others).
	// The min-isr-ack check (check_minisr.go) reads them; a fault with
	// neither stops or cuts nothing for certain.
	Down  []int   `json:"down,omitempty"`
	Sides [][]int `json:"sides,omitempty"`
}

// History is a whole run.
type History struct {
	Seed     int64         `json:"seed"`
	Nodes    int           `json:"nodes"`
	Started  time.Time     `json:"started"`  // the wall clock at time 0
	Healed   time.Duration `json:"healed"`   // when every fault was healed
	Finished time.Duration `json:"finished"` // when the final reads began
	// Drained is when the queue workload's producers stopped and its
	// consumers were given a bound to poll every acknowledged send
	// (Jepsen's final polls); zero when the run did not drain. When set,
	// an OK send to DrainTopic that no poll returned is an anomaly.
	Drained    time.Duration `json:"drained,omitempty"`
	DrainTopic string        `json:"drain_topic,omitempty"`
	// Acks1 is set when the queue's producers ("producer-*") sent with
	// acks=1 (RunOptions.Acks1): their OK sends say nothing about the
	// high watermark, so the stale-read check leaves them out.
	Acks1 bool `json:"acks1,omitempty"`
	// MinInsync is each topic's min.insync.replicas, and Replicas its
	// partitions' replicas as created (absent: every node), for the
	// min-isr-ack check.
	MinInsync map[string]int             `json:"min_insync,omitempty"`
	Replicas  map[string]map[int32][]int `json:"replicas,omitempty"`
	// Unique, when set, are the prefixes of the values the run writes
	// once: the duplicate check covers only values with one of them, so
	// other writers (a harness's probe records, written again on a retry)
	// may repeat theirs. Empty: every value is unique.
	Unique []string `json:"unique,omitempty"`
	// CommitGroup, when set with Healed, is a consumer group that must
	// consume on after the heal: in every partition whose Final read ends
	// past the offset the group had committed when the faults were healed
	// (by its OK OpFetchOffsets that ended by then), the last OK
	// OpFetchOffsets must return more (commit-stalled).
	CommitGroup string  `json:"commit_group,omitempty"`
	Ops         []Op    `json:"ops"`
	Faults      []Fault `json:"faults"`
	// Final is, per topic and partition, a read of the whole partition
	// by a fresh consumer after the run (from its log start offset to its
	// high watermark), and LogStart each partition's log start offset
	// then.
	Final    map[string]map[int32][]Record `json:"final"`
	LogStart map[string]map[int32]int64    `json:"log_start"`
	// Liveness is, per topic and partition, how long after Healed it first
	// had a leader that accepted a write (negative: it never did within
	// the runner's bound).
	Liveness map[string]map[int32]time.Duration `json:"liveness"`
	// FinalErrors are the topics whose final read did not complete within
	// the runner's bound after healing, with the error: a liveness
	// anomaly (the checks that need Final skip those topics).
	FinalErrors map[string]string `json:"final_errors,omitempty"`
}
