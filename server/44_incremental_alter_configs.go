package server

// IncrementalAlterConfigs, versions 0-1 (KIP-339): per-key operations on a
// resource's configs. v1 is flexible.
//
// Operations: SET a value, DELETE the override (the key returns to its
// default; deleting a key not set is not an error), and APPEND to or
// SUBTRACT from a list config (cleanup.policy, the throttled replicas
// lists), starting from its effective value and adding only missing
// items; APPEND or SUBTRACT on a config that is not a list is
// INVALID_CONFIG, an unknown operation INVALID_REQUEST. The operations
// apply in order to a copy, and the result is validated as a whole
// (unknown keys and bad values are INVALID_CONFIG naming the key) before
// it is stored and applied to the topic's open partition logs; with
// validate-only nothing changes. BROKER resources: SET and DELETE change a
// broker id's (or, named "", the cluster default's) dynamic configs
// (configs_broker.go: the replication throttle rates, which are not
// lists); any other key is INVALID_REQUEST, as for AlterConfigs, and a
// forwarded change is answered once this broker's metadata shows it. As
// in Kafka, a resource named twice, a key named twice and a null value
// for anything but DELETE are INVALID_REQUEST. See configs_admin.go.

import (
	"context"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 44, minVersion: 0, maxVersion: 1, serve: serveIncrementalAlterConfigs})
}

func serveIncrementalAlterConfigs(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	if fresp, ok, err := b.forward(ctx, cc, req, func(r kmsg.Response) bool { return b.incrementalAlterConfigsSettled(req, r) }); ok {
		if err != nil {
			for _, rr := range req.Resources {
				sr := kmsg.NewIncrementalAlterConfigsResponseResource()
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
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		if err := b.incrementalAlterConfigs(&rr, seen[configResource{rr.ResourceType, rr.ResourceName}] > 1, req.ValidateOnly); err != nil {
			sr.ErrorCode = kafkaCode(err)
			sr.ErrorMessage = errMessage(err)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (b *Broker) incrementalAlterConfigs(rr *kmsg.IncrementalAlterConfigsRequestResource, dup, validateOnly bool) error {
	if dup {
		return kafkaErrorf(kerr.InvalidRequest, "each resource must appear at most once")
	}
	var keys []string
	for _, c := range rr.Configs {
		keys = append(keys, c.Name)
		if c.Value == nil && c.Op != kmsg.IncrementalAlterConfigOpDelete {
			return kafkaErrorf(kerr.InvalidRequest, "null value not supported for %s", c.Name)
		}
	}
	if k, ok := duplicateName(keys); ok {
		return kafkaErrorf(kerr.InvalidRequest, "config %s appears more than once", k)
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		return b.changeTopicConfigs(rr.ResourceName, validateOnly, func(configs map[string]string) (map[string]string, error) {
			for _, c := range rr.Configs {
				if err := b.applyConfigOp(configs, c); err != nil {
					return nil, err
				}
			}
			return configs, nil
		})
	case kmsg.ConfigResourceTypeBroker:
		return b.changeBrokerConfigs(rr.ResourceName, keys, validateOnly, func(configs map[string]string) (map[string]string, error) {
			for _, c := range rr.Configs {
				if err := applyBrokerConfigOp(configs, c); err != nil {
					return nil, err
				}
			}
			return configs, nil
		})
	default:
		return kafkaErrorf(kerr.InvalidRequest, "unsupported resource type %d", rr.ResourceType)
	}
}

// applyConfigOp applies one operation to a topic's overrides.
func (b *Broker) applyConfigOp(configs map[string]string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		configs[c.Name] = *c.Value // validated with the rest
	case kmsg.IncrementalAlterConfigOpDelete:
		if _, set := configs[c.Name]; !set {
			// Refuse a typo rather than do nothing; a stored key
			// Sluice no longer knows may still be deleted.
			if err := checkTopicConfigKey(c.Name); err != nil {
				return err
			}
		}
		delete(configs, c.Name)
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		if err := checkTopicConfigKey(c.Name); err != nil {
			return err
		}
		if k, _ := replica.LookupTopicConfig(c.Name); k.Type != replica.ConfigList {
			op := "append"
			if c.Op == kmsg.IncrementalAlterConfigOpSubtract {
				op = "subtract"
			}
			return kafkaErrorf(kerr.InvalidConfig, "Config value %s is not allowed for config key: %s", op, c.Name)
		}
		cur := b.topicConfigValue(configs, c.Name)
		if c.Op == kmsg.IncrementalAlterConfigOpAppend {
			configs[c.Name] = appendList(cur, *c.Value)
		} else {
			configs[c.Name] = subtractList(cur, *c.Value)
		}
	default:
		return kafkaErrorf(kerr.InvalidRequest, "unknown operation %d for %s", c.Op, c.Name)
	}
	return nil
}

// applyBrokerConfigOp applies one operation to a broker resource's dynamic
// configs (their keys were checked).
func applyBrokerConfigOp(configs map[string]string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		configs[c.Name] = *c.Value // validated with the rest
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(configs, c.Name)
	case kmsg.IncrementalAlterConfigOpAppend:
		return kafkaErrorf(kerr.InvalidConfig, "Config value append is not allowed for config key: %s", c.Name)
	case kmsg.IncrementalAlterConfigOpSubtract:
		return kafkaErrorf(kerr.InvalidConfig, "Config value subtract is not allowed for config key: %s", c.Name)
	default:
		return kafkaErrorf(kerr.InvalidRequest, "unknown operation %d for %s", c.Op, c.Name)
	}
	return nil
}

// incrementalAlterConfigsSettled reports whether this broker's metadata
// shows what the controller set and deleted for every broker resource it
// changed (topic changes are not waited for).
func (b *Broker) incrementalAlterConfigsSettled(req *kmsg.IncrementalAlterConfigsRequest, kresp kmsg.Response) bool {
	resp, ok := kresp.(*kmsg.IncrementalAlterConfigsResponse)
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
			for _, c := range rr.Configs {
				switch c.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					want[c.Name] = c.Value
				case kmsg.IncrementalAlterConfigOpDelete:
					want[c.Name] = nil
				}
			}
			if !b.brokerConfigsSettled(rr.ResourceName, want) {
				return false
			}
		}
	}
	return true
}
