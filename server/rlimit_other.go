//go:build !unix

package server

// RaiseOpenFileLimit does nothing where RLIMIT_NOFILE does not exist.
func RaiseOpenFileLimit() (before, after uint64, err error) { return 0, 0, nil }

// openFileLimit is unknown here: 0.
func openFileLimit() uint64 { return 0 }
