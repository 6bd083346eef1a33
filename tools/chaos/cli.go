package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/tools/localcluster"
)

// Main is the runner's command line (tools/cmd/sluice-chaos): args are the flags after the command's name; output goes to
// stdout and stderr. broker returns the broker binary to run when
// --binary is not given (out is the --out folder). It returns the exit
// status: 0 when every run was valid, 1 when one found an anomaly, 2 when
// a run could not be carried out or the flags are wrong.
//
// binaryDefault says, in --binary's help, what broker returns.
func Main(name string, args []string, stdout, stderr io.Writer, broker func(out string) (string, error), binaryDefault string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		nodes     = fs.Int("nodes", 3, "broker processes (each a controller voter): 3 or 5")
		seed      = fs.Int64("seed", 0, "the first run's seed (0: from the clock)")
		seeds     = fs.Int("seeds", 1, "runs, with seeds seed, seed+1, ...")
		soak      = fs.Duration("soak", 0, "keep starting runs with new seeds until this much time passed (overrides --seeds)")
		limit     = fs.Duration("time-limit", 60*time.Second, "each run's fault phase; a run takes about 30 s more (warm-up, heal, liveness, recovery, drain, final reads), up to 90 s more when consumers cannot catch up")
		faults    = fs.String("faults", "all", "fault kinds, comma-separated: "+strings.Join(AllFaults, ","))
		seq       = fs.Bool("sequential", false, "inject the kinds in the order given, not at random (each at least once, even past --time-limit)")
		workloads = fs.String("workloads", "queue,log,offsets", "workloads, comma-separated: queue, log, offsets, txn (transactional producers, consume-transform-produce transformers and read_committed consumers)")
		out       = fs.String("out", "chaos-runs", "folder for the runs' folders")
		binary    = fs.String("binary", "", "the sluice binary (default: "+binaryDefault+")")
		keep      = fs.Bool("keep-data", false, "keep the brokers' data folders and history.json of valid runs (a run with anomalies always keeps them)")
		recheck   = fs.String("recheck", "", "check a saved history.json again and rewrite its reports; no cluster")
		verbose   = fs.Bool("v", false, "log the runner's progress (nemesis, workloads) to stderr")
		acks1     = fs.Bool("unsafe-acks1", false, "the queue's producers use acks=1 without idempotence, which may lose acknowledged writes when a leader fails: to see the checks find them")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *limit <= 0 {
		fmt.Fprintln(stderr, name+": --time-limit must be positive")
		return 2
	}
	if *nodes != 3 && *nodes != 5 {
		fmt.Fprintf(stderr, "%s: --nodes %d: a cluster here has 3 or 5 voters\n", name, *nodes)
		return 2
	}
	for _, w := range strings.Split(*workloads, ",") {
		if w != WorkloadQueue && w != WorkloadLog && w != WorkloadOffsets && w != WorkloadTxn {
			fmt.Fprintf(stderr, "%s: unknown workload %q (known: queue, log, offsets, txn)\n", name, w)
			return 2
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if *recheck != "" {
		h, err := ReadJSON(*recheck)
		if err != nil {
			fmt.Fprintln(stderr, name+":", err)
			return 2
		}
		res := Check(h)
		dir := filepath.Dir(*recheck)
		if f, err := os.Create(filepath.Join(dir, "report.txt")); err == nil {
			WriteText(f, h, res)
			f.Close()
		}
		if err := WriteHTML(dir, h, res); err != nil {
			fmt.Fprintln(stderr, name+":", err)
		}
		fmt.Fprintln(stdout, res.Verdict())
		if !res.Valid() {
			return 1
		}
		return 0
	}

	kinds, err := ParseFaults(*faults)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 2
	}
	bin := *binary
	if bin == "" {
		if bin, err = broker(*out); err != nil {
			fmt.Fprintln(stderr, name+":", err)
			return 2
		}
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000
	}

	began := time.Now()
	var sum summary
	status := 0
	for i := 0; ctx.Err() == nil; i++ {
		if *soak > 0 && time.Since(began) > *soak {
			break
		}
		if *soak == 0 && i >= *seeds {
			break
		}
		s := *seed + int64(i)
		dir := filepath.Join(*out, fmt.Sprintf("seed-%d", s))
		os.RemoveAll(dir)
		h, res, err := Run(ctx, RunOptions{Binary: bin, Dir: dir, Nodes: *nodes, Seed: s,
			Workloads: strings.Split(*workloads, ","), Faults: kinds, Sequential: *seq, Duration: *limit, Acks1: *acks1, Logger: log})
		if err != nil {
			fmt.Fprintf(stdout, "ERROR seed=%d: %v (node logs in %s)\n", s, err, dir)
			status = 2
			continue
		}
		fmt.Fprintf(stdout, "%s  (%s)\n", res.Verdict(), filepath.Join(dir, "report.html"))
		sum.add(h, res)
		if !res.Valid() {
			status = max(status, 1)
			fmt.Fprintf(stdout, "  every anomaly with its records: %s; the history: %s\n",
				filepath.Join(dir, "report.txt"), filepath.Join(dir, "history.json"))
		} else if !*keep {
			for id := 1; id <= h.Nodes; id++ {
				os.RemoveAll(filepath.Join(dir, fmt.Sprintf("node%d", id)))
			}
			os.Remove(filepath.Join(dir, "history.json")) // about 0.5 MB per second of run
		}
	}
	sum.elapsed = time.Since(began)
	text := sum.String()
	fmt.Fprint(stdout, text)
	os.WriteFile(filepath.Join(*out, "summary.txt"), []byte(text), 0o644)
	return status
}

// BuildBroker builds the broker with -tags faults into out, from the
// repository holding the working directory (localcluster.Build).
func BuildBroker(out string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(out, "sluice-faults"))
	if err != nil {
		return "", err
	}
	return bin, localcluster.Build(bin, "faults")
}

// summary totals runs: faults injected per kind and anomalies per kind.
type summary struct {
	runs, invalid int
	seeds         []int64
	faults        map[string]int
	anomalies     map[string]int
	ops           int
	elapsed       time.Duration
}

func (s *summary) add(h *History, res *Result) {
	if s.faults == nil {
		s.faults, s.anomalies = map[string]int{}, map[string]int{}
	}
	s.runs++
	s.seeds = append(s.seeds, h.Seed)
	s.ops += len(h.Ops)
	if !res.Valid() {
		s.invalid++
	}
	for _, f := range h.Faults {
		s.faults[f.Kind]++
	}
	for k, n := range res.Counts {
		s.anomalies[string(k)] += n
	}
}

func (s *summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runs %d (%d with anomalies), seeds %v, %s, %d operations\n", s.runs, s.invalid, s.seeds, s.elapsed.Round(time.Second), s.ops)
	for _, k := range slices.Sorted(maps.Keys(s.faults)) {
		fmt.Fprintf(&b, "  fault %-16s %d\n", k, s.faults[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.anomalies)) {
		fmt.Fprintf(&b, "  anomaly %-24s %d\n", k, s.anomalies[k])
	}
	return b.String()
}
