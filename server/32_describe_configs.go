package server

// DescribeConfigs, versions 0-4. v1 adds each config's source and, when
// asked, its synonyms (the chain of values it falls back on, highest
// precedence first), replacing v0's is-default flag; v2 changes nothing;
// v3 adds the config type and, when asked, documentation (Sluice gives the
// type of topic configs, UNKNOWN for broker configs, and no
// documentation); v4 is flexible.
//
// Resources: TOPIC (every topic config with its effective value: the
// topic's own, TOPIC_CONFIG, else the broker key's, STATIC_BROKER_CONFIG
// when set in server.properties or --set, else DEFAULT_CONFIG; the
// throttled replicas lists, which have no broker synonym, the topic's own
// or DEFAULT_CONFIG) and BROKER (named by node.id: every static broker
// config, read-only, and the dynamic ones, DYNAMIC_BROKER_CONFIG or
// DYNAMIC_DEFAULT_BROKER_CONFIG when set; named "": the cluster-wide
// dynamic defaults set; configs_broker.go).
// Other resource types are INVALID_REQUEST. See configs_admin.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 32, minVersion: 0, maxVersion: 4, serve: serveDescribeConfigs})
}

func serveDescribeConfigs(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	synonyms := req.Version >= 1 && req.IncludeSynonyms
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		want := wantConfig(rr.ConfigNames)
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			sr.Configs, err = b.describeTopicConfigs(rr.ResourceName, want, synonyms)
		case kmsg.ConfigResourceTypeBroker:
			sr.Configs, err = b.describeBrokerConfigs(rr.ResourceName, want, synonyms)
		default:
			err = kafkaErrorf(kerr.InvalidRequest, "unsupported resource type %d", rr.ResourceType)
		}
		if err != nil {
			sr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
			sr.ErrorCode = kafkaCode(err)
			sr.ErrorMessage = errMessage(err)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}
