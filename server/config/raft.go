package config

import "time"

// ReplicaLagTime is replica.lag.time.max.ms as a duration, for
// replica.RaftConfig.ReplicaLagTime.
func (c *Config) ReplicaLagTime() time.Duration {
	return time.Duration(c.ReplicaLagTimeMaxMs) * time.Millisecond
}
