package main

// The cluster side of the operator commands (reassign, elect-leaders,
// decommission): the flags they share, the client, the two reads most of
// them need (Metadata, ListPartitionReassignments), and how errors are
// shown (Kafka's error name, the broker's message, a one-line hint).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/server/cmd/sluice/internal/clienttls"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// defaultBootstrap is --bootstrap-server's default: the single node
// `sluice serve` runs with no flags, and node 1 of tools/cluster.sh.
const defaultBootstrap = "127.0.0.1:9092"

// pollInterval is how often the --wait flags look again.
var pollInterval = time.Second

// progressEvery is how often a wait that sees no change says so.
var progressEvery = 10 * time.Second

// clusterFlags are the flags every cluster command has.
type clusterFlags struct {
	bootstrap string
	timeout   time.Duration
	sec       *clienttls.Flags
}

func addClusterFlags(fs *pflag.FlagSet) *clusterFlags {
	c := &clusterFlags{}
	fs.StringVar(&c.bootstrap, "bootstrap-server", defaultBootstrap, "the cluster: any of its brokers, comma-separated `host:port`s")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long one request to the cluster may take")
	c.sec = clienttls.Add(fs)
	return c
}

// seeds checks --bootstrap-server and splits it.
func (c *clusterFlags) seeds() ([]string, error) {
	var out []string
	for _, s := range strings.Split(c.bootstrap, ",") {
		s = strings.TrimSpace(s)
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			return nil, usageErrorf("--bootstrap-server: %q is not host:port", s)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, usageErrorf("--bootstrap-server: %q: bad port", s)
		}
		out = append(out, s)
	}
	if c.timeout <= 0 {
		return nil, usageErrorf("--timeout must be positive, not %v", c.timeout)
	}
	return out, nil
}

// admin is a connection to a cluster.
type admin struct {
	cl       *kgo.Client
	adm      *kadm.Client
	timeout  time.Duration
	versions map[int16]bool // the API keys the cluster offers, once asked
}

// dialOpts are the client security flags' kgo options (TLS, SASL), if
// any.
func (c *clusterFlags) dialOpts() ([]kgo.Opt, error) {
	if c.sec == nil {
		return nil, nil
	}
	opts, err := c.sec.Opts()
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return opts, nil
}

// connect makes the client (it dials on first use).
func (c *clusterFlags) connect() (*admin, error) {
	seeds, err := c.seeds()
	if err != nil {
		return nil, err
	}
	dial, err := c.dialOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("sluice-admin"),
		kgo.DialTimeout(min(c.timeout, 10*time.Second)),
		kgo.RetryTimeout(c.timeout),
	}, dial...)...)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(c.timeout, time.Duration(1<<31-1)*time.Millisecond) / time.Millisecond))
	return &admin{cl: cl, adm: adm, timeout: c.timeout}, nil
}

func (a *admin) close() { a.cl.Close() }

// ctx bounds one request by --timeout.
func (a *admin) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, a.timeout)
}

func (a *admin) timeoutMillis() int32 {
	return int32(min(a.timeout, time.Duration(1<<31-1)*time.Millisecond) / time.Millisecond)
}

// supports fails unless the cluster offers API key (in the ApiVersions
// of the broker the client asks; the answer is kept). It is checked
// before the operator APIs, which a broker may not serve: Kafka and
// Sluice close the connection on an API they do not serve, and the
// client, which learns a broker's versions only once connected, would
// report that as a broken connection.
func (a *admin) supports(ctx context.Context, key kmsg.Key) error {
	if a.versions == nil {
		ctx, cancel := a.ctx(ctx)
		defer cancel()
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, a.cl)
		if err != nil {
			return fmt.Errorf("ApiVersions: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("ApiVersions: %w", err)
		}
		a.versions = map[int16]bool{}
		for _, k := range resp.ApiKeys {
			a.versions[k.ApiKey] = true
		}
	}
	if !a.versions[key.Int16()] {
		return fmt.Errorf("%w: %s (key %d) is not in its ApiVersions", errUnsupportedAPI, apiName(key), key)
	}
	return nil
}

// errUnsupportedAPI marks an API the cluster does not offer.
var errUnsupportedAPI = errors.New("the cluster does not offer this API")

// apiName is Kafka's name for an API (kmsg calls key 45
// AlterPartitionAssignments).
func apiName(key kmsg.Key) string {
	if key == kmsg.AlterPartitionAssignments {
		return "AlterPartitionReassignments"
	}
	return kmsg.NameForKey(key.Int16())
}

// partitionState is one partition as Metadata describes it.
type partitionState struct {
	leader   int32
	replicas []int32
	isr      []int32
	offline  []int32
	err      error
}

// clusterState is one Metadata answer.
type clusterState struct {
	brokers    []int32 // sorted
	controller int32
	topics     map[string]error // every topic answered, with its error
	parts      map[tp]partitionState
}

// partitionsOf lists topic's partitions, sorted.
func (s *clusterState) partitionsOf(topic string) []int32 {
	var ps []int32
	for p := range s.parts {
		if p.Topic == topic {
			ps = append(ps, p.Partition)
		}
	}
	slices.Sort(ps)
	return ps
}

// describe asks Metadata for topics (nil: every topic), fresh (not from
// the client's cache).
func (a *admin) describe(ctx context.Context, topics []string) (*clusterState, error) {
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, fmt.Errorf("Metadata: %w", err)
	}
	s := &clusterState{controller: resp.ControllerID, topics: map[string]error{}, parts: map[tp]partitionState{}}
	for _, b := range resp.Brokers {
		s.brokers = append(s.brokers, b.NodeID)
	}
	slices.Sort(s.brokers)
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		s.topics[*t.Topic] = kerr.ErrorForCode(t.ErrorCode)
		for _, p := range t.Partitions {
			s.parts[tp{*t.Topic, p.Partition}] = partitionState{
				leader:   p.Leader,
				replicas: p.Replicas,
				isr:      p.ISR,
				offline:  p.OfflineReplicas,
				err:      kerr.ErrorForCode(p.ErrorCode),
			}
		}
	}
	return s, nil
}

// describeTopics is describe for topics that must exist: a topic the
// cluster does not know is an error.
func (a *admin) describeTopics(ctx context.Context, topics []string) (*clusterState, error) {
	s, err := a.describe(ctx, topics)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		terr, ok := s.topics[t]
		if !ok {
			terr = kerr.UnknownTopicOrPartition
		}
		if terr != nil && len(s.partitionsOf(t)) == 0 {
			return nil, fmt.Errorf("topic %s: %w", t, terr)
		}
	}
	return s, nil
}

// reassignment is one partition's reassignment in progress, as
// ListPartitionReassignments reports it (KIP-455): replicas is the whole
// set while it moves, adding and removing what changes.
type reassignment struct {
	replicas, adding, removing []int32
}

// source is where the partition was: replicas without adding.
func (r reassignment) source() []int32 {
	var out []int32
	for _, b := range r.replicas {
		if !slices.Contains(r.adding, b) {
			out = append(out, b)
		}
	}
	return out
}

// listReassignments asks ListPartitionReassignments for partitions (nil:
// every partition of the cluster).
func (a *admin) listReassignments(ctx context.Context, partitions []tp) (map[tp]reassignment, error) {
	if err := a.supports(ctx, kmsg.ListPartitionReassignments); err != nil {
		return nil, err
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = a.timeoutMillis()
	if partitions != nil {
		byTopic := map[string][]int32{}
		var order []string
		for _, p := range partitions {
			if _, ok := byTopic[p.Topic]; !ok {
				order = append(order, p.Topic)
			}
			byTopic[p.Topic] = append(byTopic[p.Topic], p.Partition)
		}
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		for _, t := range order {
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic, rt.Partitions = t, byTopic[t]
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, fmt.Errorf("ListPartitionReassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("ListPartitionReassignments: %w", withMessage(err, resp.ErrorMessage))
	}
	out := map[tp]reassignment{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[tp{t.Topic, p.Partition}] = reassignment{replicas: p.Replicas, adding: p.AddingReplicas, removing: p.RemovingReplicas}
		}
	}
	return out, nil
}

// sortedTPs lists m's keys in order.
func sortedTPs[V any](m map[tp]V) []tp {
	out := make([]tp, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// topicsOf lists the topics of as, sorted, once each.
func topicsOf(as []assignment) []string {
	var out []string
	for _, a := range as {
		if !slices.Contains(out, a.Topic) {
			out = append(out, a.Topic)
		}
	}
	slices.Sort(out)
	return out
}

// partitions is "1 partition" or "n partitions".
func partitions(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}

// isAre is "is" for 1, else "are".
func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// brokerList prints ids sorted, comma-separated ("none" for none).
func brokerList(ids []int32) string {
	if len(ids) == 0 {
		return "none"
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return joinInts(ids, ",")
}

// Errors.

// errReported is returned by a command that has printed its failures.
var errReported = errors.New("sluice: failures reported above")

// usageError is a bad command line found after flag parsing.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// messageError is a Kafka error with the broker's own message.
type messageError struct {
	err error
	msg string
}

// Error is "NAME: the broker's message" for a Kafka error.
func (e *messageError) Error() string {
	var ke *kerr.Error
	if errors.As(e.err, &ke) {
		return ke.Message + ": " + e.msg
	}
	return e.err.Error() + ": " + e.msg
}

func (e *messageError) Unwrap() error { return e.err }

// withMessage adds a broker's ErrorMessage to err, if there is one. A
// message that starts with the error's own name (Sluice's do) loses that
// prefix, so the name is printed once.
func withMessage(err error, msg *string) error {
	if err == nil || msg == nil || *msg == "" {
		return err
	}
	m := *msg
	var ke *kerr.Error
	if errors.As(err, &ke) {
		m = strings.TrimPrefix(m, ke.Message+": ")
		if m == ke.Message {
			return err
		}
	}
	return &messageError{err, m}
}

// kafkaHints are the one-line hints shown with Kafka's errors.
var kafkaHints = map[*kerr.Error]string{
	kerr.UnknownTopicOrPartition:            "check the topic and partition exist (sluice topic list lists the topics, sluice topic describe --topic T their partitions)",
	kerr.InvalidReplicaAssignment:           "every replica must be a registered broker, named once (sluice cluster describe lists the brokers)",
	kerr.InvalidReplicationFactor:           "the replica list is empty, or longer than there are brokers",
	kerr.NoReassignmentInProgress:           "the partition is not moving: nothing to cancel (sluice reassign list)",
	kerr.ReassignmentInProgress:             "a reassignment is running: wait for it (sluice reassign verify) or cancel it (sluice reassign cancel)",
	kerr.NotController:                      "the controller moved: run the command again",
	kerr.RequestTimedOut:                    "the cluster did not finish in time, and may still: look again (sluice reassign list, or verify)",
	kerr.ClusterAuthorizationFailed:         "the principal lacks an ACL on the cluster for this (an idempotent producer needs IDEMPOTENT_WRITE on it or WRITE on a topic; admin commands ALTER or DESCRIBE): sluice acl list --cluster shows them",
	kerr.TopicAuthorizationFailed:           "the principal lacks an ACL on the topic for this (produce: WRITE; consume: READ; describe: DESCRIBE; configs: DESCRIBE_CONFIGS, ALTER_CONFIGS): sluice acl list --topic T shows them",
	kerr.GroupAuthorizationFailed:           "the principal lacks an ACL on the group (READ to consume in it, DESCRIBE to describe it): sluice acl list --group G shows them",
	kerr.TransactionalIDAuthorizationFailed: "the principal lacks WRITE on the transactional id: sluice acl list --transactional-id ID shows the ACLs",
	kerr.InvalidConfig:                      "the broker refused the config key or value (see its message)",
	kerr.InvalidRequest:                     "the broker refused the request (see its message, and its log)",
	kerr.UnsupportedVersion:                 "the cluster does not support this request or version",
	kerr.PolicyViolation:                    "a broker policy refused the change (see its message)",
	kerr.PreferredLeaderNotAvailable:        "the preferred replica is down or not in the ISR: let it catch up (sluice reassign verify) and elect again",
	kerr.EligibleLeadersNotAvailable:        "no replica is eligible to lead (for --type unclean, one must at least be alive)",
	kerr.ElectionNotNeeded:                  "the partition already has the leader the election would pick",
	kerr.BrokerIDNotRegistered:              "no broker with that id is registered (sluice cluster describe lists the brokers)",
	kerr.LeaderNotAvailable:                 "the partition has no leader right now: wait and try again",
	kerr.UnknownServerError:                 "the broker failed (see its log)",
	// The everyday tools (topic, group, produce, consume).
	kerr.TopicAlreadyExists:           "the topic exists already (sluice topic describe --topic T shows it; --if-not-exists accepts it)",
	kerr.InvalidPartitions:            "partitions only grow: give a count above the current one (sluice topic describe shows it)",
	kerr.InvalidTopicException:        "topic names are at most 249 characters of [a-zA-Z0-9._-], and not . or ..",
	kerr.GroupIDNotFound:              "no such group (sluice group list lists them)",
	kerr.NonEmptyGroup:                "the group has active members: stop its consumers first (sluice group describe --members lists them)",
	kerr.GroupSubscribedToTopic:       "a member of the group is subscribed to the topic: stop its consumers first",
	kerr.UnknownMemberID:              "the group has active members, or the member was removed: stop its consumers and try again",
	kerr.IllegalGeneration:            "the group rebalanced: stop its consumers and try again",
	kerr.RebalanceInProgress:          "the group is rebalancing: wait, or stop its consumers, and try again",
	kerr.CoordinatorNotAvailable:      "the group coordinator is not available yet: wait and try again",
	kerr.NotCoordinator:               "the group coordinator moved: run the command again",
	kerr.InvalidGroupID:               "the group id is empty or invalid",
	kerr.OffsetOutOfRange:             "the offset is outside the log start and end offsets (sluice topic describe shows them)",
	kerr.MessageTooLarge:              "a record is larger than the topic's max.message.bytes (or the broker's message.max.bytes)",
	kerr.RecordListTooLarge:           "a batch is larger than the broker accepts (message.max.bytes)",
	kerr.NotEnoughReplicas:            "fewer replicas are in the ISR than min.insync.replicas: wait for them, or produce with --acks 1",
	kerr.NotEnoughReplicasAfterAppend: "the record was written but fewer replicas than min.insync.replicas have it",
	kerr.InvalidRequiredAcks:          "--acks must be all, 1 or 0",
	kerr.TopicDeletionDisabled:        "the cluster refuses topic deletion (delete.topic.enable=false)",
	kerr.UnsupportedCompressionType:   "the broker does not accept this --compression (zstd needs Kafka 2.1+ produce versions)",
}

// hintFor is the one-line hint for err, or "".
func hintFor(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return kafkaHints[ke]
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return ""
	case errors.Is(err, syscall.ECONNREFUSED), strings.Contains(err.Error(), "connection refused"):
		return "is a broker listening there? (--bootstrap-server, default " + defaultBootstrap + "; a broker the error names, other than those, is down)"
	case strings.Contains(err.Error(), "unknown broker"):
		return "the cluster's metadata has no such live broker: it is down, fenced or not registered (sluice cluster describe lists them)"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within --timeout: is the cluster up and reachable at --bootstrap-server?"
	case errors.Is(err, errUnsupportedAPI), strings.Contains(err.Error(), "broker is too old"):
		return "its brokers do not implement this request; a newer version of them may"
	}
	return ""
}

// errName is Kafka's name for err, or "".
func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return ""
}

// hints collects the hints of the errors printed, to print each once.
type hints struct {
	order []string
	seen  map[string]bool
	text  map[string]string
}

func (h *hints) note(err error) {
	hint := hintFor(err)
	if hint == "" {
		return
	}
	key := errName(err)
	if key == "" {
		key = hint
	}
	if h.seen == nil {
		h.seen, h.text = map[string]bool{}, map[string]string{}
	}
	if !h.seen[key] {
		h.seen[key] = true
		h.order = append(h.order, key)
		h.text[key] = hint
	}
}

func (h *hints) print(w io.Writer) {
	for _, k := range h.order {
		if k == h.text[k] {
			fmt.Fprintf(w, "hint: %s\n", k)
		} else {
			fmt.Fprintf(w, "hint (%s): %s\n", k, h.text[k])
		}
	}
}

// failure is how every command prints an error: "sluice CMD: err", or
// "sluice CMD: what: err" for one of several things it works on.
func failure(cmdPath, what string, err error) string {
	if what == "" {
		return fmt.Sprintf("%s: %v", cmdPath, err)
	}
	return fmt.Sprintf("%s: %s: %v", cmdPath, what, err)
}

// finish turns a command's error into its exit code: 0, 2 for a bad
// command line, 1 for anything else (printed with its hint unless the
// command printed it already).
func finish(name string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s (%s -h for help)\n", name, ue.msg, name)
		return 2
	}
	if errors.Is(err, errReported) {
		return 1
	}
	fmt.Fprintln(stderr, failure(name, "", err))
	if h := hintFor(err); h != "" {
		fmt.Fprintf(stderr, "hint: %s\n", h)
	}
	return 1
}

// parseIDs parses a comma-separated list of broker ids.
func parseIDs(flagName, s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usageErrorf("%s is required (a comma-separated list of broker ids)", flagName)
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return nil, usageErrorf("%s: %q is not a broker id", flagName, strings.TrimSpace(f))
		}
		if slices.Contains(out, int32(n)) {
			return nil, usageErrorf("%s: broker %d is listed twice", flagName, n)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// parseNames parses a comma-separated list of topics.
func parseNames(flagName, s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usageErrorf("%s is required (a comma-separated list of topics)", flagName)
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, usageErrorf("%s: empty topic name in %q", flagName, s)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// progress prints a waiting command's state when it changes, and at
// least every progressEvery.
type progress struct {
	w    io.Writer
	last string
	at   time.Time
}

func (p *progress) report(line string) {
	if line == p.last && time.Since(p.at) < progressEvery {
		return
	}
	fmt.Fprintf(p.w, "%s %s\n", time.Now().Format("15:04:05"), line)
	p.last, p.at = line, time.Now()
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
