package replica

import "go.etcd.io/raft/v3"

// post queues fn to run on the group's RawNode in the worker that owns it
// and returns without waiting (fn reports its own outcome; its error is
// dropped). Calls posted for one group run in the order posted, which is
// how a partition's proposals keep the order its producers' sequence
// checks saw. It fails at once when the group is not on the host.
func (h *Host) post(id GroupID, fn func(rn *raft.RawNode) error) error {
	return h.postGroup(id, func(g *group) error { return fn(g.rn) })
}

// postGroup is post with the group itself.
func (h *Host) postGroup(id GroupID, fn func(g *group) error) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	g.mu.Lock()
	if err := g.removed; err != nil {
		g.mu.Unlock()
		return err
	}
	g.ops = append(g.ops, groupOp{fn: fn, wake: true, done: make(chan error, 1)})
	g.mu.Unlock()
	h.sched.enqueue(g)
	return nil
}
