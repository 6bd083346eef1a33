package segment

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestConfigCompactionKeys(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.CleanupPolicy != PolicyDelete || cfg.DeleteRetentionMs != 86400000 || cfg.MinCleanableDirtyRatio != 0.5 ||
		cfg.MinCompactionLagMs != 0 || cfg.MaxCompactionLagMs != math.MaxInt64 || !cfg.Deletes() || cfg.Compacts() {
		t.Fatalf("defaults %+v", cfg)
	}
	for value, want := range map[string]string{
		"delete": PolicyDelete, "compact": PolicyCompact, "compact,delete": PolicyCompactDelete,
		"delete,compact": PolicyCompactDelete, " compact , delete ": PolicyCompactDelete,
	} {
		c := DefaultConfig()
		if err := c.Set("cleanup.policy", value); err != nil || c.CleanupPolicy != want {
			t.Errorf("cleanup.policy=%q: %q %v", value, c.CleanupPolicy, err)
		}
	}
	for _, bad := range []string{"", "compacted", "delete,", "Compact", "compact,,delete"} {
		c := DefaultConfig()
		if err := c.Set("cleanup.policy", bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("cleanup.policy=%q accepted", bad)
		}
	}
	c := DefaultConfig()
	for k, v := range map[string]string{"delete.retention.ms": "5", "min.cleanable.dirty.ratio": "0.25",
		"min.compaction.lag.ms": "7", "max.compaction.lag.ms": "9"} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if c.DeleteRetentionMs != 5 || c.MinCleanableDirtyRatio != 0.25 || c.MinCompactionLagMs != 7 || c.MaxCompactionLagMs != 9 {
		t.Fatalf("set: %+v", c)
	}
	if err := c.Set("min.cleanable.dirty.ratio", "half"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal("a non-number ratio accepted")
	}
	c.MinCleanableDirtyRatio, c.DeleteRetentionMs, c.MinCompactionLagMs, c.MaxCompactionLagMs, c.CleanupPolicy = 1.5, -1, 10, 0, "x"
	err := c.Validate()
	for _, key := range []string{"min.cleanable.dirty.ratio", "delete.retention.ms", "max.compaction.lag.ms", "min.compaction.lag.ms", "cleanup.policy"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate does not report %s: %v", key, err)
		}
	}
	keys := strings.Join(Keys(), " ")
	for _, key := range []string{"cleanup.policy", "delete.retention.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms"} {
		if !strings.Contains(keys, key) {
			t.Errorf("Keys() lacks %s", key)
		}
	}
}
