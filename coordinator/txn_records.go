package coordinator

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The __transaction_state record formats: Kafka's TransactionLogKey and
// TransactionLogValue (TransactionLog.scala), as franz-go's kmsg encodes
// them. kmsg's Version field is the int16 version prefix Kafka writes in
// front of each key and value (MessageUtil.toVersionPrefixedBytes).
//
//	key   version 0:  TxnMetadataKey{transactional.id}
//	value version 1:  TxnMetadataValue (flexible: compact strings and
//	                  arrays, tagged fields) {producer id, producer epoch,
//	                  timeout ms, state, topics (null when Empty),
//	                  last update ms, start ms; tags: 0 previous producer
//	                  id, 1 next producer id, 2 client transaction
//	                  version, 3 next producer epoch}
//	value nil:        a tombstone: the transactional id expired
//
// Value version 0 (Kafka before 4.0, no tagged fields) is read; version 1
// is always written, as Kafka 4 does with transaction.version 2.
//
// The format constants below are part of the on-disk format.
const (
	txnKeyVersion   int16 = 0 // TransactionLogKey
	txnValueVersion int16 = 1 // TransactionLogValue, flexible
	txnValueMaxRead int16 = 1 // the newest value version Load reads
)

// Transaction states: Kafka's TransactionState ids (TransactionState.java),
// as the log stores them and kmsg.TransactionState names them.
const (
	txnEmpty             kmsg.TransactionState = 0
	txnOngoing           kmsg.TransactionState = 1
	txnPrepareCommit     kmsg.TransactionState = 2
	txnPrepareAbort      kmsg.TransactionState = 3
	txnCompleteCommit    kmsg.TransactionState = 4
	txnCompleteAbort     kmsg.TransactionState = 5
	txnDead              kmsg.TransactionState = 6
	txnPrepareEpochFence kmsg.TransactionState = 7
)

// errTxnRecord marks a __transaction_state record Load cannot read.
var errTxnRecord = errors.New("coordinator: bad __transaction_state record")

// txnStateByName maps Kafka's state names (ListTransactions' state
// filters, DescribeTransactions' state) to states.
var txnStateByName = func() map[string]kmsg.TransactionState {
	m := map[string]kmsg.TransactionState{}
	for s := txnEmpty; s <= txnPrepareEpochFence; s++ {
		m[s.String()] = s
	}
	return m
}()

// encodeTxnKey is the record key of transactionalID.
func encodeTxnKey(transactionalID string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = txnKeyVersion
	k.TransactionalID = transactionalID
	return k.AppendTo(nil)
}

// encodeTxnValue is t's record value. Topics are sorted by name and
// partition so a state always encodes the same; an Empty transaction has
// null topics, as Kafka writes it.
func encodeTxnValue(t *txnMeta) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = txnValueVersion
	v.ProducerID = t.producerID
	v.ProducerEpoch = t.epoch
	v.TimeoutMillis = t.timeoutMs
	v.State = t.state
	v.LastUpdateTimestamp = t.updateMs
	v.StartTimestamp = t.startMs
	v.PreviousProducerID = t.prevProducerID
	v.NextProducerID = t.nextProducerID
	v.ClientTransactionVersion = t.tv
	v.NextProducerEpoch = -1
	if t.state != txnEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range t.sortedParts() {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				vt := kmsg.NewTxnMetadataValueTopic()
				vt.Topic = tp.Topic
				v.Topics = append(v.Topics, vt)
			}
			vt := &v.Topics[len(v.Topics)-1]
			vt.Partitions = append(vt.Partitions, tp.Partition)
		}
	}
	return v.AppendTo(nil)
}

// txnRecord is the record holding t's state.
func txnRecord(t *txnMeta) Record {
	return Record{Key: encodeTxnKey(t.id), Value: encodeTxnValue(t)}
}

// txnTombstone is the record removing transactionalID.
func txnTombstone(transactionalID string) Record {
	return Record{Key: encodeTxnKey(transactionalID)}
}

// decodeTxnRecord reads a record: the transactional id and its state, or
// nil for a tombstone. ok is false for a key of another version, which Load
// skips (Kafka's TransactionLog.readTxnRecordKey answers an unknown key).
func decodeTxnRecord(r Record) (id string, t *txnMeta, ok bool, err error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(r.Key); err != nil {
		return "", nil, false, fmt.Errorf("%w: key: %v", errTxnRecord, err)
	}
	if k.Version != txnKeyVersion {
		return "", nil, false, nil
	}
	if r.Value == nil {
		return k.TransactionalID, nil, true, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(r.Value); err != nil {
		return "", nil, false, fmt.Errorf("%w: value of %q: %v", errTxnRecord, k.TransactionalID, err)
	}
	if v.Version < 0 || v.Version > txnValueMaxRead {
		return "", nil, false, fmt.Errorf("%w: value of %q: unknown version %d", errTxnRecord, k.TransactionalID, v.Version)
	}
	if v.State < txnEmpty || v.State > txnPrepareEpochFence {
		return "", nil, false, fmt.Errorf("%w: value of %q: unknown state %d", errTxnRecord, k.TransactionalID, v.State)
	}
	t = &txnMeta{
		id:             k.TransactionalID,
		producerID:     v.ProducerID,
		prevProducerID: v.PreviousProducerID,
		nextProducerID: v.NextProducerID,
		epoch:          v.ProducerEpoch,
		lastEpoch:      -1, // not in the log (Kafka loads it as NO_PRODUCER_EPOCH)
		timeoutMs:      v.TimeoutMillis,
		state:          v.State,
		parts:          map[TxnPartition]struct{}{},
		startMs:        v.StartTimestamp,
		updateMs:       v.LastUpdateTimestamp,
		tv:             v.ClientTransactionVersion,
	}
	if v.Version == 0 {
		t.prevProducerID, t.nextProducerID, t.tv = -1, -1, 0
	}
	for _, vt := range v.Topics {
		for _, p := range vt.Partitions {
			t.parts[TxnPartition{Topic: vt.Topic, Partition: p}] = struct{}{}
		}
	}
	return k.TransactionalID, t, true, nil
}

// sortedParts returns t's partitions by topic, then partition.
func (t *txnMeta) sortedParts() []TxnPartition {
	out := make([]TxnPartition, 0, len(t.parts))
	for tp := range t.parts {
		out = append(out, tp)
	}
	sortTxnPartitions(out)
	return out
}

func sortTxnPartitions(ps []TxnPartition) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}
