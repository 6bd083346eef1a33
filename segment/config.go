package segment

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Config holds a partition log's settings. Each field names the Kafka topic
// config it implements; DefaultConfig returns Kafka's defaults. Unlike
// Pebble's Options, zero is a meaningful value for several fields (for
// example IndexIntervalBytes 0 indexes every batch), so callers start from
// DefaultConfig rather than from a zero Config.
type Config struct {
	// SegmentBytes is segment.bytes: an append that would take the active
	// segment past this many bytes rolls a new segment first. Default 1 GiB;
	// minimum 14 (Kafka's); a single batch larger than this still fits in a
	// segment of its own.
	SegmentBytes int64
	// SegmentMs is segment.ms: the active segment rolls when an appended
	// batch's max timestamp is this many ms past the first batch's max
	// timestamp (or, when the segment has no timestamps, when the segment is
	// this old by the clock). Default 7 days.
	SegmentMs int64
	// SegmentIndexBytes is segment.index.bytes: the preallocated size in
	// bytes of each index file; a full index rolls the segment. Default 10 MiB.
	SegmentIndexBytes int
	// IndexIntervalBytes is index.interval.bytes: a batch appended after at
	// least this many bytes since the previous index entry gets an offset
	// and a time index entry. Default 4096; 0 indexes every batch.
	IndexIntervalBytes int
	// RetentionMs is retention.ms: closed segments whose largest timestamp
	// is older than this many ms are deleted. Default 7 days; -1 keeps all.
	RetentionMs int64
	// RetentionBytes is retention.bytes: the oldest closed segments are
	// deleted while the partition would still be at least this many bytes
	// without them. Default -1; any negative value means no limit (as in
	// Kafka, which has no lower bound here).
	RetentionBytes int64
	// FlushMessages is flush.messages: the log syncs after this many
	// unsynced records. Default math.MaxInt64 (leave it to the page cache).
	FlushMessages int64
	// FlushMs is flush.ms: the log syncs when unsynced data is this many ms
	// old. Default math.MaxInt64.
	FlushMs int64
	// FileDeleteDelayMs is file.delete.delay.ms: deleted segments are
	// renamed with a ".deleted" suffix and removed this many ms later, so
	// reads already handed out stay valid. Default 60000.
	FileDeleteDelayMs int64

	// CleanupPolicy is cleanup.policy: "delete" (retention.ms and
	// retention.bytes delete old segments), "compact" (the Cleaner keeps
	// only the latest record of each key; retention deletes nothing) or
	// "compact,delete" (both). Set accepts the two words in either order
	// and stores them in this canonical form. Default "delete".
	CleanupPolicy string
	// DeleteRetentionMs is delete.retention.ms: how long, in ms, a
	// compacted log keeps a tombstone (a record with a null value) after
	// the cleaner first saw it (KIP-534's delete horizon). Default 86400000
	// (one day).
	DeleteRetentionMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the cleaner
	// cleans a log only when its dirty bytes are at least this fraction of
	// its cleanable bytes (unless max.compaction.lag.ms forces it). A
	// fraction in [0, 1]; default 0.5.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose largest
	// timestamp is less than this many ms old is not cleaned yet, nor
	// anything after it. Default 0.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: a log whose oldest
	// dirty segment is this many ms old is cleaned whatever its dirty
	// ratio. Default math.MaxInt64 (never forced); minimum 1.
	MaxCompactionLagMs int64
}

// Cleanup policies (cleanup.policy values, canonical form).
const (
	PolicyDelete        = "delete"
	PolicyCompact       = "compact"
	PolicyCompactDelete = "compact,delete"
)

// Compacts reports whether cleanup.policy includes compact.
func (c Config) Compacts() bool {
	return c.CleanupPolicy == PolicyCompact || c.CleanupPolicy == PolicyCompactDelete
}

// Deletes reports whether cleanup.policy includes delete: only then does
// retention.ms or retention.bytes delete segments.
func (c Config) Deletes() bool {
	return c.CleanupPolicy == PolicyDelete || c.CleanupPolicy == PolicyCompactDelete
}

// parsePolicy returns the canonical form of a cleanup.policy value: a
// comma-separated list of "delete" and "compact" in any order, read as
// Kafka's ConfigDef reads a list (white space around items dropped, items
// case-sensitive, an empty item refused). replica's topic config table
// parses the key the same way (its tests check they agree).
func parsePolicy(v string) (string, bool) {
	var del, comp bool
	for _, w := range strings.Split(strings.TrimSpace(v), ",") {
		switch strings.TrimSpace(w) {
		case PolicyDelete:
			del = true
		case PolicyCompact:
			comp = true
		default:
			return "", false
		}
	}
	switch {
	case del && comp:
		return PolicyCompactDelete, true
	case comp:
		return PolicyCompact, true
	case del:
		return PolicyDelete, true
	}
	return "", false
}

// DefaultConfig returns Kafka's topic defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 60 * 60 * 1000,
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * 60 * 60 * 1000,
		RetentionBytes:     -1,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		FileDeleteDelayMs:  60000,

		CleanupPolicy:          PolicyDelete,
		DeleteRetentionMs:      24 * 60 * 60 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
	}
}

// ErrInvalidConfig marks every configuration error.
var ErrInvalidConfig = errors.New("segment: invalid config")

// Validate reports every problem at once, each naming the Kafka key.
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, key string, v any, rule string) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s=%v: %s", ErrInvalidConfig, key, v, rule))
		}
	}
	check(c.SegmentBytes >= 14 && c.SegmentBytes <= math.MaxInt32, "segment.bytes", c.SegmentBytes, "must be in [14, 2147483647]")
	check(c.SegmentMs >= 1, "segment.ms", c.SegmentMs, "must be >= 1")
	check(c.SegmentIndexBytes >= 4, "segment.index.bytes", c.SegmentIndexBytes, "must be >= 4")
	check(c.IndexIntervalBytes >= 0, "index.interval.bytes", c.IndexIntervalBytes, "must be >= 0")
	check(c.RetentionMs >= -1, "retention.ms", c.RetentionMs, "must be >= -1")
	check(c.FlushMessages >= 1, "flush.messages", c.FlushMessages, "must be >= 1")
	check(c.FlushMs >= 0, "flush.ms", c.FlushMs, "must be >= 0")
	check(c.FileDeleteDelayMs >= 0, "file.delete.delay.ms", c.FileDeleteDelayMs, "must be >= 0")
	_, ok := parsePolicy(c.CleanupPolicy)
	check(ok, "cleanup.policy", c.CleanupPolicy, "must be delete, compact or compact,delete")
	check(c.DeleteRetentionMs >= 0, "delete.retention.ms", c.DeleteRetentionMs, "must be >= 0")
	check(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1, "min.cleanable.dirty.ratio", c.MinCleanableDirtyRatio, "must be in [0, 1]")
	check(c.MinCompactionLagMs >= 0, "min.compaction.lag.ms", c.MinCompactionLagMs, "must be >= 0")
	check(c.MaxCompactionLagMs >= 1, "max.compaction.lag.ms", c.MaxCompactionLagMs, "must be >= 1")
	check(c.MinCompactionLagMs <= c.MaxCompactionLagMs, "min.compaction.lag.ms", c.MinCompactionLagMs, "must not exceed max.compaction.lag.ms")
	return errors.Join(errs...)
}

// configKeys maps Kafka's topic config names onto Config fields.
var configKeys = map[string]func(c *Config) *int64{
	"segment.bytes":         func(c *Config) *int64 { return &c.SegmentBytes },
	"segment.ms":            func(c *Config) *int64 { return &c.SegmentMs },
	"retention.ms":          func(c *Config) *int64 { return &c.RetentionMs },
	"retention.bytes":       func(c *Config) *int64 { return &c.RetentionBytes },
	"flush.messages":        func(c *Config) *int64 { return &c.FlushMessages },
	"flush.ms":              func(c *Config) *int64 { return &c.FlushMs },
	"file.delete.delay.ms":  func(c *Config) *int64 { return &c.FileDeleteDelayMs },
	"delete.retention.ms":   func(c *Config) *int64 { return &c.DeleteRetentionMs },
	"min.compaction.lag.ms": func(c *Config) *int64 { return &c.MinCompactionLagMs },
	"max.compaction.lag.ms": func(c *Config) *int64 { return &c.MaxCompactionLagMs },
}

// Keys returns the Kafka topic config names Set accepts.
func Keys() []string {
	keys := []string{"segment.index.bytes", "index.interval.bytes", "cleanup.policy", "min.cleanable.dirty.ratio"}
	for k := range configKeys {
		keys = append(keys, k)
	}
	return keys
}

// Set sets one field by its Kafka topic config name. It returns an error
// wrapping ErrInvalidConfig for an unknown key or a value that does not
// parse (an integer; a number for min.cleanable.dirty.ratio; a policy list
// for cleanup.policy); range checks are Validate's. Values are trimmed, as
// Kafka does. The broker resolves topic configs with replica's table
// (replica.ResolveTopicConfig), which sets these fields itself; Set is for
// code that uses a log on its own (tests, tools), and its tests in replica
// check that it accepts exactly what the table accepts.
func (c *Config) Set(key, value string) error {
	value = strings.TrimSpace(value)
	switch key {
	case "cleanup.policy":
		p, ok := parsePolicy(value)
		if !ok {
			return fmt.Errorf("%w: %s=%q: not a list of delete and compact", ErrInvalidConfig, key, value)
		}
		c.CleanupPolicy = p
		return nil
	case "min.cleanable.dirty.ratio":
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: not a number", ErrInvalidConfig, key, value)
		}
		c.MinCleanableDirtyRatio = f
		return nil
	}
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s=%q: not an integer", ErrInvalidConfig, key, value)
	}
	switch key {
	case "segment.index.bytes":
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: %s=%d: too large", ErrInvalidConfig, key, v)
		}
		c.SegmentIndexBytes = int(v)
		return nil
	case "index.interval.bytes":
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: %s=%d: too large", ErrInvalidConfig, key, v)
		}
		c.IndexIntervalBytes = int(v)
		return nil
	}
	f, ok := configKeys[key]
	if !ok {
		return fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, key)
	}
	*f(c) = v
	return nil
}
