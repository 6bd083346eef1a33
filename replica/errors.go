package replica

import "errors"

// Errors of the produce path and of partition operations. Each wraps into
// a message naming the problem; the server maps them to Kafka codes
// (00_produce.go, errors.go there).
var (
	// ErrInvalidRecord is Kafka's INVALID_RECORD: a batch LogValidator
	// refuses (more than one batch, control or delete-horizon bits from a
	// client, a record without a key on a compacted topic).
	ErrInvalidRecord = errors.New("replica: invalid record")
	// ErrRecordTooLarge is MESSAGE_TOO_LARGE: a batch over
	// max.message.bytes.
	ErrRecordTooLarge = errors.New("replica: record batch too large")
	// ErrInternalTopic is INVALID_TOPIC_EXCEPTION: clients may not write
	// to, or delete records of, an internal topic (__consumer_offsets).
	ErrInternalTopic = errors.New("replica: internal topic")
	// ErrPolicyViolation is POLICY_VIOLATION: DeleteRecords on a topic
	// whose cleanup.policy is compact only (Kafka's
	// Partition.deleteRecordsOnLeader).
	ErrPolicyViolation = errors.New("replica: policy violation")
	// ErrUnknownLeaderEpoch and ErrFencedLeaderEpoch are a request's
	// current leader epoch newer, or older, than the partition's (KIP-320;
	// Kafka's Partition.checkCurrentLeaderEpoch).
	ErrUnknownLeaderEpoch = errors.New("replica: unknown leader epoch")
	ErrFencedLeaderEpoch  = errors.New("replica: fenced leader epoch")
	// ErrLostCommitted: Open of a replica whose log ends before the
	// entries its raft group's saved state says it committed or applied
	// (a damaged log served only up to the damage, an older copy of a
	// file): it cannot rejoin its group (Partition.holdsCommitted).
	ErrLostCommitted = errors.New("replica: the log lost committed entries")
	// ErrNoRaft: Open without Options.Raft. Every partition is a raft
	// group (a single replica a group of one voter), so there is no
	// partition without one.
	ErrNoRaft = errors.New("replica: Options.Raft is required (a single replica is a one-voter raft group)")
	// ErrOffsetOutOfRange is OFFSET_OUT_OF_RANGE for DeleteRecords past
	// the high watermark.
	ErrOffsetOutOfRange = errors.New("replica: offset out of range")
)
