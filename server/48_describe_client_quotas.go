package server

// DescribeClientQuotas, versions 0-1 (KIP-546; v1 flexible), as Kafka 4
// serves them, from this broker's metadata, filtered as Kafka's
// ClientQuotasImage.describe: each component names an entity type at most
// once (else INVALID_REQUEST; an unknown type is UNSUPPORTED_VERSION) and
// matches exactly a name (match type exact: the match must be non-null),
// the default entity (default: no match string) or any entity with that
// type (specified: no match string); an ip component never with a user or
// client-id one. Strict keeps only entities with no other types than the
// components'. An error is the response's, with no entries.

import (
	"context"
	"maps"
	"slices"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 48, minVersion: 0, maxVersion: 1, serve: serveDescribeClientQuotas})
}

func serveDescribeClientQuotas(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	exact, typed, err := quotaFilter(req.Components)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kafkaCode(err), errMessage(err)
		return resp, nil
	}
	quotas, _ := b.meta.ClientQuotas()
	for _, q := range quotas {
		if !quotaMatches(q.Entity, exact, typed, req.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, t := range []string{meta.QuotaUser, meta.QuotaClientID, meta.QuotaIP} {
			n, ok := q.Entity[t]
			if !ok {
				continue
			}
			re := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			re.Type = t
			if n != "" {
				re.Name = kmsg.StringPtr(n)
			}
			e.Entity = append(e.Entity, re)
		}
		for _, k := range slices.Sorted(maps.Keys(q.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

// quotaFilter reads the components: exact maps a type to the name it
// must have (nil: the default entity), typed holds the types an entity must
// have with any name.
func quotaFilter(cs []kmsg.DescribeClientQuotasRequestComponent) (exact map[string]*string, typed map[string]bool, err error) {
	exact, typed = map[string]*string{}, map[string]bool{}
	for _, c := range cs {
		_, inExact := exact[c.EntityType]
		switch {
		case c.EntityType == "":
			return nil, nil, kafkaErrorf(kerr.InvalidRequest, "invalid empty entity type")
		case inExact || typed[c.EntityType]:
			return nil, nil, kafkaErrorf(kerr.InvalidRequest, "entity type %s cannot appear more than once in the filter", c.EntityType)
		case c.EntityType != meta.QuotaUser && c.EntityType != meta.QuotaClientID && c.EntityType != meta.QuotaIP:
			return nil, nil, kafkaErrorf(kerr.UnsupportedVersion, "unsupported entity type %s", c.EntityType)
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return nil, nil, kafkaErrorf(kerr.InvalidRequest, "match type exact with a null match string")
			}
			exact[c.EntityType] = c.Match
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return nil, nil, kafkaErrorf(kerr.InvalidRequest, "match type default with a match string")
			}
			exact[c.EntityType] = nil
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return nil, nil, kafkaErrorf(kerr.InvalidRequest, "match type specified with a match string")
			}
			typed[c.EntityType] = true
		default:
			return nil, nil, kafkaErrorf(kerr.InvalidRequest, "unknown match type %d", c.MatchType)
		}
	}
	_, ipExact := exact[meta.QuotaIP]
	if (ipExact || typed[meta.QuotaIP]) && len(exact)+len(typed) > 1 {
		return nil, nil, kafkaErrorf(kerr.InvalidRequest, "an ip filter component cannot be used with a user or client-id component")
	}
	return exact, typed, nil
}

// quotaMatches is Kafka's ClientQuotasImage.matches.
func quotaMatches(e meta.QuotaEntity, exact map[string]*string, typed map[string]bool, strict bool) bool {
	if strict && len(e) != len(exact)+len(typed) {
		return false
	}
	for t, n := range exact {
		m, ok := e[t]
		if !ok || n == nil && m != "" || n != nil && (m == "" || m != *n) {
			return false
		}
	}
	for t := range typed {
		if _, ok := e[t]; !ok {
			return false
		}
	}
	return true
}
