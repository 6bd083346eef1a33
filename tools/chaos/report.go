package chaos

import (
	"fmt"
	"strings"
)

// Verdict is the result in one line.
func (r *Result) Verdict() string {
	if r.Valid() {
		s := fmt.Sprintf("VALID seed=%d nodes=%d ops=%d faults=%d", r.Seed, r.Nodes, r.Ops, r.Faults)
		if len(r.Notes) > 0 {
			s += fmt.Sprintf(" (%d notes)", len(r.Notes))
		}
		return s
	}
	var parts []string
	for _, k := range Kinds {
		if n := r.Counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return fmt.Sprintf("INVALID seed=%d: %s", r.Seed, strings.Join(parts, ", "))
}
