package controller

import "slices"

// FenceOut applies fencing to a partition's leadership as Metadata
// reports it. Kafka's controller takes a fenced broker out of every ISR
// and out of leadership when its session expires
// (ReplicationControlManager.handleBrokerFenced); here raft progress alone
// would keep a silent follower in sync for replica.lag.time.max.ms, so the
// rule applies to every view: the replicas whose broker is not live
// (fenced, or not registered) are offline, they leave the ISR, and a
// leader among them is no leader (-1).
func FenceOut(replicas, isr []int32, leader int32, live func(id int32) bool) (offline, inSync []int32, lead int32) {
	for _, r := range replicas {
		if !live(r) {
			offline = append(offline, r)
		}
	}
	inSync = slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return slices.Contains(offline, id) })
	if inSync == nil {
		inSync = []int32{}
	}
	if leader >= 0 && !live(leader) {
		leader = -1
	}
	return offline, inSync, leader
}
