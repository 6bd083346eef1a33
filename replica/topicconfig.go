package replica

import (
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// TopicConfig is a topic's configuration resolved once (when the topic is
// opened or its configs change), typed.
type TopicConfig struct {
	Log               segment.Config // the partition log's settings (segment.bytes, retention.*, flush.*, cleanup.policy, ...)
	MaxMessageBytes   int            // max.message.bytes: the largest record batch accepted, in bytes
	LogAppendTime     bool           // message.timestamp.type=LogAppendTime
	Compression       batch.Codec    // compression.type when it names a codec
	KeepProducerCodec bool           // compression.type=producer: batches are stored as sent
	MinInsyncReplicas int            // min.insync.replicas
}
