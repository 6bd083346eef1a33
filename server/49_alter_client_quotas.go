package server

// AlterClientQuotas, versions 0-1 (KIP-546; v1 flexible), as Kafka 4
// serves them. Served by the active controller (forwarded from any
// broker, answered once this broker's metadata shows the change). Each
// entry is checked as Kafka's ClientQuotaControlManager: entity types
// user, client-id and ip, each at most once, an ip alone and a valid
// address, a name null (the default entity) or non-empty, keys valid for
// the entity's types, values above 0 (integral for byte and connection
// rates); a failing entry is INVALID_REQUEST and none of its ops apply.
// ValidateOnly checks without applying. The valid entries' changes are
// one metadata change (meta.ClientQuotaChanged, one per op).

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/netip"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 49, minVersion: 0, maxVersion: 1, serve: serveAlterClientQuotas})
}

func serveAlterClientQuotas(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	result := func(e kmsg.AlterClientQuotasRequestEntry, err error) {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		r.ErrorCode, r.ErrorMessage = kafkaCode(err), errMessage(err)
		for _, en := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = en.Type, en.Name
			r.Entity = append(r.Entity, re)
		}
		resp.Entries = append(resp.Entries, r)
	}
	if fresp, ok, err := b.forward(ctx, cc, req, func(r kmsg.Response) bool { return b.quotasSettled(req, r) }); ok {
		if err != nil {
			for _, e := range req.Entries {
				result(e, err)
			}
			return resp, nil
		}
		return fresp, nil
	}
	errs := make([]error, len(req.Entries))
	var batch []meta.ClientQuotaChanged
	var owner []int // batch[j] is of req.Entries[owner[j]]
	for i, e := range req.Entries {
		changes, err := quotaChanges(e)
		if errs[i] = err; err != nil {
			continue
		}
		for _, c := range changes {
			batch = append(batch, c)
			owner = append(owner, i)
		}
	}
	if len(batch) > 0 && !req.ValidateOnly {
		merrs, err := b.meta.AlterClientQuotas(batch)
		for j, i := range owner {
			e := err
			if e == nil {
				e = merrs[j]
			}
			if e != nil && errs[i] == nil {
				errs[i] = quotaMetaErr(e)
			}
		}
		b.logger.Info("sluice: client quotas altered", "changes", len(batch))
	}
	for i, e := range req.Entries {
		result(e, errs[i])
	}
	return resp, nil
}

// quotaChanges checks one AlterClientQuotas entry and returns its
// changes; an error is the entry's INVALID_REQUEST.
func quotaChanges(e kmsg.AlterClientQuotasRequestEntry) ([]meta.ClientQuotaChanged, error) {
	ent, err := quotaEntity(e.Entity)
	if err != nil {
		return nil, err
	}
	var out []meta.ClientQuotaChanged
	for _, op := range e.Ops {
		if op.Remove {
			if _, err := meta.ValidateQuotaEntity(ent); err != nil {
				return nil, quotaMetaErr(err)
			}
			out = append(out, meta.ClientQuotaChanged{Entity: ent, Key: op.Key, Remove: true})
			continue
		}
		if err := meta.ValidateQuotaValue(ent, op.Key, op.Value); err != nil {
			return nil, quotaMetaErr(err)
		}
		out = append(out, meta.ClientQuotaChanged{Entity: ent, Key: op.Key, Value: op.Value})
	}
	return out, nil
}

// quotaEntity converts a request's entity (a null name is the default
// entity: "" in meta.QuotaEntity), refusing what Kafka's
// ClientQuotaControlManager.validateEntity refuses.
func quotaEntity(es []kmsg.AlterClientQuotasRequestEntryEntity) (meta.QuotaEntity, error) {
	ent := meta.QuotaEntity{}
	for _, en := range es {
		if _, dup := ent[en.Type]; dup {
			return nil, kafkaErrorf(kerr.InvalidRequest, "invalid client quota entity, duplicate entity entry %s", en.Type)
		}
		name := ""
		if en.Name != nil {
			if *en.Name == "" {
				return nil, kafkaErrorf(kerr.InvalidRequest, "empty %s not supported", en.Type)
			}
			name = *en.Name
		}
		ent[en.Type] = name
	}
	if _, err := meta.ValidateQuotaEntity(ent); err != nil {
		return nil, quotaMetaErr(err)
	}
	if ip, ok := ent[meta.QuotaIP]; ok && ip != "" && !validIPEntity(ip) {
		return nil, kafkaErrorf(kerr.InvalidRequest, "%s is not a valid IP or resolvable host", ip)
	}
	return ent, nil
}

// validIPEntity reports whether an ip entity's name is an address or a
// host name that resolves (Kafka's isValidIpEntity).
func validIPEntity(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	addrs, err := net.LookupHost(s)
	return err == nil && len(addrs) > 0
}

// quotaMetaErr maps the metadata's refusal of a quota change.
func quotaMetaErr(err error) error {
	if errors.Is(err, meta.ErrInvalidQuota) {
		return kafkaErrorf(kerr.InvalidRequest, "%v", err)
	}
	return err
}

// quotasSettled reports whether this broker's metadata shows a forwarded
// change's successful entries (values set, removed ones gone).
func (b *Broker) quotasSettled(req *kmsg.AlterClientQuotasRequest, r kmsg.Response) bool {
	resp, ok := r.(*kmsg.AlterClientQuotasResponse)
	if !ok || req.ValidateOnly {
		return true
	}
	quotas, _ := b.meta.ClientQuotas()
	for i, e := range req.Entries {
		if i >= len(resp.Entries) || resp.Entries[i].ErrorCode != 0 {
			continue
		}
		ent, err := quotaEntity(e.Entity)
		if err != nil {
			continue
		}
		values := quotaValues(quotas, ent)
		for _, op := range e.Ops {
			v, there := values[op.Key]
			if op.Remove == there || !op.Remove && v != op.Value {
				return false
			}
		}
	}
	return true
}

// quotaValues returns the values of entity ent (nil if it has none).
func quotaValues(quotas []meta.ClientQuota, ent meta.QuotaEntity) map[string]float64 {
	for _, q := range quotas {
		if maps.Equal(q.Entity, ent) {
			return q.Values
		}
	}
	return nil
}
