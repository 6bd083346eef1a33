// Package coordinator will hold the consumer group coordinator: the classic
// group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the KIP-848
// consumer protocol, and committed offsets stored in the __consumer_offsets
// topic with Kafka's own key and value schemas, rebuilt by replaying that
// topic's partition when the coordinator starts.
//
// The code arrives with the consumer group work; until then this module only
// states its job.
package coordinator
