package server

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkaError carries a Kafka error code with a message; internal errors
// become Kafka codes only here, at the protocol boundary.
type kafkaError struct {
	code *kerr.Error
	msg  string
}

func (e *kafkaError) Error() string { return fmt.Sprintf("%s: %s", e.code.Message, e.msg) }
func (e *kafkaError) Unwrap() error { return e.code }

func kafkaErrorf(code *kerr.Error, format string, args ...any) error {
	return &kafkaError{code: code, msg: fmt.Sprintf(format, args...)}
}

// kafkaErrorCode is a Kafka error by its code (another broker's answer),
// with msg.
func kafkaErrorCode(code int16, msg string) error {
	ke, ok := kerr.ErrorForCode(code).(*kerr.Error)
	if !ok {
		ke = kerr.UnknownServerError
	}
	return &kafkaError{code: ke, msg: msg}
}

func errIs(err error, code *kerr.Error) bool { return errors.Is(err, code) }

// kafkaCode maps an internal error to the Kafka error code a client sees.
func kafkaCode(err error) int16 {
	var ke *kafkaError
	var oor *segment.OutOfRangeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.code.Code
	case errors.Is(err, segment.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.As(err, &oor):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, segment.ErrClosed):
		// Brokers close a log only when its topic is deleted (or when
		// shutting down, after requests have finished).
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, replica.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, replica.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, replica.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, replica.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, replica.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, replica.ErrRecordTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, replica.ErrInternalTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, replica.ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, replica.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, replica.ErrPolicyViolation):
		return kerr.PolicyViolation.Code
	case errors.Is(err, replica.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrLeaderNotAvailable):
		// A replica that does not lead, whether another one does or none
		// does, answers Produce, Fetch, ListOffsets, OffsetForLeaderEpoch
		// and DeleteRecords so, as Kafka's Partition does (getLocalLog
		// and appendRecordsToLeader: NOT_LEADER_OR_FOLLOWER when this
		// broker is not the leader; only Metadata says a partition has no
		// leader, LEADER_NOT_AVAILABLE).
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, replica.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, meta.ErrNotController):
		// The controller changed under a metadata change (retriable:
		// clients send it again, and it is forwarded anew).
		return kerr.NotController.Code
	case errors.Is(err, meta.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, meta.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}

// errMessage is the message for a response's ErrorMessage field.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// currentLeader returns the leader hint of a NOT_LEADER_OR_FOLLOWER (or
// LEADER_NOT_AVAILABLE) error for KIP-951's CurrentLeader fields of
// Produce v10+ and Fetch v12+: the leader's node id (the raft replica id
// is the broker's node id; -1 when there is none) and its leader epoch;
// ok is false for any other error.
func currentLeader(err error) (id, epoch int32, ok bool) {
	var nl *replica.NotLeaderError
	if !errors.As(err, &nl) {
		return -1, -1, false
	}
	if nl.Leader == 0 {
		return -1, nl.Epoch, true
	}
	return int32(nl.Leader), nl.Epoch, true
}

// notLeader returns the NotLeaderError a replica that does not lead part
// answers a client's Fetch, ListOffsets or OffsetForLeaderEpoch with, nil
// on the leader. A leader without a read lease refuses too (NoLease: NOT_LEADER_OR_FOLLOWER, no
// hint; readlease.go). Follower fetching (KIP-392) is not served.
func (b *Broker) notLeader(part *replica.Partition, what string) error {
	if part.IsLeader() {
		if err := part.CheckReadLease(); err != nil {
			var nl *replica.NotLeaderError
			if errors.As(err, &nl) {
				nl.Reason = what + ": " + nl.Reason
			}
			return err
		}
		return nil
	}
	if ferr := part.Failed(); ferr != nil {
		// This replica's log failed (an IO error, a full disk): raft's
		// storage failure took its group off the host, so it leads no
		// more. The cause is its log dir: KAFKA_STORAGE_ERROR, as
		// Kafka's ReplicaManager answers for a partition on an offline
		// log dir, until the reconciler reopens it (faults.go).
		return kafkaErrorf(kerr.KafkaStorageError, "%s: the partition's log failed: %v", what, ferr)
	}
	lead, epoch, _ := part.Leader()
	return &replica.NotLeaderError{Leader: lead, Epoch: epoch, Reason: what + " goes to the partition leader"}
}
