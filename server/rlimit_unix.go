//go:build unix

package server

import "syscall"

// RaiseOpenFileLimit raises the process's soft RLIMIT_NOFILE to its hard
// limit (partitions, connections and the metadata store all hold file
// descriptors) and returns the limits before and after; errors are
// getrlimit's or setrlimit's. The sluice binary calls it at start-up.
func RaiseOpenFileLimit() (before, after uint64, err error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0, err
	}
	before = uint64(l.Cur)
	if l.Cur >= l.Max {
		return before, before, nil
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return before, before, err
	}
	return before, uint64(l.Cur), nil
}

// openFileLimit is the current soft RLIMIT_NOFILE; 0 when unknown.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return uint64(l.Cur)
}
