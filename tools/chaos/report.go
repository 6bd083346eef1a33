// This file is the text report, the verdict line and the history's JSON
// form (history.json, so that a run can be checked again).

package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// Verdict is the result in one line: "VALID seed=42 nodes=3 ops=12345
// faults=9" or "INVALID seed=42: lost-write 3, duplicate 1".
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

// WriteText writes the report for people: the verdict, the counts, the
// fault schedule and every anomaly with its operations and records.
func WriteText(w io.Writer, h *History, r *Result) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p("%s\n\n", r.Verdict())
	p("seed %d, %d nodes, started %s; healed at %s, final reads at %s\n", h.Seed, h.Nodes,
		h.Started.Format("2006-01-02 15:04:05 MST"), secs(h.Healed), secs(h.Finished))
	p("%d operations: sends %d ok, %d fail, %d info; %d polls returned %d records; final reads %d records; %d expired sends\n",
		len(h.Ops), r.SendsOK, r.SendsFail, r.SendsInfo, r.Polls, r.RecordsSeen, r.FinalRecords, r.Expired)
	if n := r.TxnCommitted + r.TxnAborted + r.TxnUnknown + r.TxnNotCommitted; n > 0 {
		p("%d transactions: %d committed, %d aborted, %d unknown (commit asked, no answer), %d not committed otherwise; %d write cycles (G0, allowed)\n",
			n, r.TxnCommitted, r.TxnAborted, r.TxnUnknown, r.TxnNotCommitted, r.TxnWriteCycles)
	}
	if len(r.Counts) > 0 {
		p("anomalies:")
		for _, k := range Kinds {
			if n := r.Counts[k]; n > 0 {
				p(" %s %d;", k, n)
			}
		}
		p("\n")
	}
	for _, c := range r.Checks {
		p("linearizability %s: %s (%d operations)\n", c.Name, c.Result, c.Ops)
	}
	for _, n := range r.Notes {
		p("note: %s\n", n)
	}

	p("\nfaults (%d):\n", len(h.Faults))
	for i, f := range h.Faults {
		p("  %2d. [%s, %s] %-9s nodes %v: %s\n", i+1, secs(f.Start), faultEnd(h, f), f.Kind, f.Nodes, f.What)
	}

	p("\nanomalies (%d):\n", len(r.Anomalies))
	for i, a := range r.Anomalies {
		p("\n%d. %s: %s\n", i+1, a.Kind, a.Msg)
		for _, j := range a.Ops {
			if j >= 0 && j < len(h.Ops) {
				p("   op %s\n", opDetail(h, j))
			}
		}
		if len(a.Records) > 0 {
			p("   records:")
			for _, rec := range a.Records {
				p(" %s", rec)
			}
			p("\n")
		}
	}
	return bw.Flush()
}

// faultEnd is when f was healed, for people.
func faultEnd(h *History, f Fault) string {
	if f.End > 0 {
		return secs(f.End)
	}
	return "end of faults"
}

// opDetail describes operation i with what it asked and got.
func opDetail(h *History, i int) string {
	op := h.Ops[i]
	s := opRef(h, i)
	if op.Topic != "" {
		s += fmt.Sprintf(" topic %s", op.Topic)
	}
	if op.Group != "" {
		s += fmt.Sprintf(" group %q", op.Group)
	}
	switch op.Kind {
	case OpSend, OpAppend:
		s += fmt.Sprintf(" p%d value %q", op.Partition, op.Value)
		if op.Outcome == OK {
			s += fmt.Sprintf(" at offset %d", op.Offset)
		}
	case OpPoll:
		s += fmt.Sprintf(" %d records", len(op.Records))
		if n := len(op.Records); n > 0 {
			s += fmt.Sprintf(" (%s ... %s)", op.Records[0], op.Records[n-1])
		}
	case OpAssign:
		s += fmt.Sprintf(" partitions %v", op.Parts)
	case OpCommit, OpFetchOffsets, OpHighWater:
		if op.Via != "" {
			s += " via " + op.Via
		}
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(op.Offsets)) {
			parts = append(parts, fmt.Sprintf("%d:%d", p, op.Offsets[p]))
		}
		s += " offsets {" + strings.Join(parts, " ") + "}"
	case OpRead:
		s += fmt.Sprintf(" p%d %s", op.Partition, describeLog(op.Values))
	case OpTxn:
		end := op.Txn
		if end == "" {
			end = "not ended"
		}
		s += fmt.Sprintf(" %s %s, records", op.Value, end)
		for _, r := range op.Records {
			s += " " + r.String()
		}
	}
	if op.Err != "" {
		s += fmt.Sprintf(" error %q", op.Err)
	}
	return s
}

// WriteJSON writes h to path as JSON.
func WriteJSON(path string, h *History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if err := json.NewEncoder(bw).Encode(h); err != nil {
		f.Close()
		return fmt.Errorf("chaos: writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadJSON reads a history WriteJSON wrote.
func ReadJSON(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := &History{}
	if err := json.NewDecoder(bufio.NewReader(f)).Decode(h); err != nil {
		return nil, fmt.Errorf("chaos: reading %s: %w", path, err)
	}
	return h, nil
}
