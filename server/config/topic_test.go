package config

import (
	"testing"

	"github.com/sluicemq/sluice/replica"
)

// TestTopicSynonymsParseAsTopicKeys: the broker key of every topic config
// accepts exactly the values the topic config accepts, and shows them as
// the topic table does. (The throttled replicas lists have no broker key.)
func TestTopicSynonymsParseAsTopicKeys(t *testing.T) {
	values := []string{"-9223372036854775808", "-2", "-1", "0", "1", "3", "4", "13", "14", " 100 ", "0.5", "1.5", "x", "",
		"2147483647", "2147483648", "9223372036854775807", "9223372036854775808",
		"delete", "compact", "compact,delete", "compact, delete", " delete , compact ", "Compact", "compact,,delete", "delete,",
		"CreateTime", " LogAppendTime", "logappendtime", "producer", "gzip ", "none", "uncompressed"}
	for _, k := range replica.TopicConfigKeys() {
		if k.BrokerKey == "" {
			continue
		}
		for _, v := range values {
			canon, terr := k.Parse(v)
			c := Default()
			berr := c.Set(k.BrokerKey, v)
			if (terr == nil) != (berr == nil) {
				t.Errorf("%s=%q: topic %s: %v; broker %s: %v", k.Name, v, k.Name, terr, k.BrokerKey, berr)
				continue
			}
			if terr != nil {
				continue
			}
			got, _ := c.String(k.BrokerKey)
			if k.Name == "cleanup.policy" {
				// The broker keeps a set, shown in Kafka's canonical order.
				p, _ := replica.ResolveTopicConfig(map[string]string{k.Name: v}, nil)
				canon = p.Log.CleanupPolicy
			}
			if got != canon {
				t.Errorf("%s=%q: broker shows %q, topic %q", k.BrokerKey, v, got, canon)
			}
		}
	}
}
