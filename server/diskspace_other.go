//go:build !linux && !darwin

package server

// diskSpace is unknown on this platform: -1, -1 (DescribeLogDirs allows it).
func diskSpace(string) (total, usable int64) { return -1, -1 }
