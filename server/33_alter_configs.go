package server

// AlterConfigs, versions 0-2: the legacy, non-incremental change. A
// resource's configs replace its whole set of overrides: a key left out
// returns to its default. v1 adds the throttle time; v2 is flexible.
//
// TOPIC: every resulting key and value is validated (unknown keys and bad
// values are INVALID_CONFIG naming the key), then the set is stored in
// the metadata and applied to the topic's open partition logs; with
// validate-only nothing changes. BROKER: the configs replace the broker
// id's (or, named "", the cluster default's) whole set of dynamic configs
// (configs_broker.go: the replication throttle rates); any other key is
// INVALID_REQUEST (Kafka's answer for a config that cannot be updated
// dynamically). A change forwarded to the active controller is answered
// once this broker's metadata shows a broker resource's new configs
// (5 s at most). As in Kafka,
// a resource named twice, a key named twice and a null value are
// INVALID_REQUEST. See configs_admin.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 33, minVersion: 0, maxVersion: 2, serve: serveAlterConfigs})
}

func serveAlterConfigs(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	if fresp, ok, err := b.forward(ctx, cc, req, func(r kmsg.Response) bool { return b.alterConfigsSettled(req, r) }); ok {
		if err != nil {
			for _, rr := range req.Resources {
				sr := kmsg.NewAlterConfigsResponseResource()
				sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
				sr.ErrorCode, sr.ErrorMessage = kafkaCode(err), errMessage(err)
				resp.Resources = append(resp.Resources, sr)
			}
			return resp, nil
		}
		return fresp, nil
	}
	seen := map[configResource]int{}
	for _, rr := range req.Resources {
		seen[configResource{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		if err := b.alterConfigs(&rr, seen[configResource{rr.ResourceType, rr.ResourceName}] > 1, req.ValidateOnly); err != nil {
			sr.ErrorCode = kafkaCode(err)
			sr.ErrorMessage = errMessage(err)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (b *Broker) alterConfigs(rr *kmsg.AlterConfigsRequestResource, dup, validateOnly bool) error {
	if dup {
		return kafkaErrorf(kerr.InvalidRequest, "each resource must appear at most once")
	}
	var keys []string
	configs := map[string]string{}
	for _, c := range rr.Configs {
		if c.Value == nil {
			return kafkaErrorf(kerr.InvalidRequest, "null value not supported for %s", c.Name)
		}
		keys = append(keys, c.Name)
		configs[c.Name] = *c.Value
	}
	if k, ok := duplicateName(keys); ok {
		return kafkaErrorf(kerr.InvalidRequest, "config %s appears more than once", k)
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		return b.changeTopicConfigs(rr.ResourceName, validateOnly, func(map[string]string) (map[string]string, error) {
			return configs, nil
		})
	case kmsg.ConfigResourceTypeBroker:
		// The resource's whole set of dynamic configs, as for a topic.
		return b.changeBrokerConfigs(rr.ResourceName, keys, validateOnly, func(map[string]string) (map[string]string, error) {
			return configs, nil
		})
	default:
		return kafkaErrorf(kerr.InvalidRequest, "unsupported resource type %d", rr.ResourceType)
	}
}

// alterConfigsSettled reports whether this broker's metadata shows the
// dynamic configs of every broker resource the controller changed (topic
// changes are not waited for).
func (b *Broker) alterConfigsSettled(req *kmsg.AlterConfigsRequest, kresp kmsg.Response) bool {
	resp, ok := kresp.(*kmsg.AlterConfigsResponse)
	if !ok || req.ValidateOnly {
		return true
	}
	for _, sr := range resp.Resources {
		if sr.ErrorCode != 0 || sr.ResourceType != kmsg.ConfigResourceTypeBroker {
			continue
		}
		for _, rr := range req.Resources {
			if rr.ResourceType != sr.ResourceType || rr.ResourceName != sr.ResourceName {
				continue
			}
			want := map[string]*string{}
			for _, k := range dynamicBrokerTable {
				want[k.name] = nil // left out: removed
			}
			for _, c := range rr.Configs {
				want[c.Name] = c.Value
			}
			if !b.brokerConfigsSettled(rr.ResourceName, want) {
				return false
			}
		}
	}
	return true
}
