package server

// AlterUserScramCredentials, version 0 (KIP-554; flexible). Served by the
// active controller (forwarded from any broker, answered once this
// broker's metadata shows the change). As Kafka's ScramControlManager: a
// user named more than once in one request (deletions and upsertions
// together, whatever the mechanisms) is DUPLICATE_RESOURCE; an empty name
// or iterations outside [4096, 16384] or an empty salt or salted
// password is UNACCEPTABLE_CREDENTIAL; an unknown mechanism is
// UNSUPPORTED_SASL_MECHANISM; deleting a credential that does not exist
// is RESOURCE_NOT_FOUND. The server derives StoredKey and ServerKey from
// the salted password (RFC 5802) and stores those with the salt and
// iterations (meta.ScramCredentialChanged); the salted password is not
// kept. The valid changes are applied as one metadata change.

import (
	"context"
	"errors"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 51, minVersion: 0, maxVersion: 0, serve: serveAlterUserScramCredentials})
}

func serveAlterUserScramCredentials(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	result := func(user string, err error) {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode, r.ErrorMessage = user, kafkaCode(err), errMessage(err)
		resp.Results = append(resp.Results, r)
	}
	if fresp, ok, err := b.forward(ctx, cc, req, func(r kmsg.Response) bool { return b.scramSettled(req, r) }); ok {
		if err != nil {
			seen := map[string]bool{}
			for _, d := range req.Deletions {
				if !seen[d.Name] {
					seen[d.Name] = true
					result(d.Name, err)
				}
			}
			for _, u := range req.Upsertions {
				if !seen[u.Name] {
					seen[u.Name] = true
					result(u.Name, err)
				}
			}
			return resp, nil
		}
		return fresp, nil
	}
	var order []string
	errs := map[string]error{}
	changes := map[string]meta.ScramCredentialChanged{}
	note := func(name string, ch meta.ScramCredentialChanged, err error) {
		if _, failed := errs[name]; failed {
			return
		}
		if _, dup := changes[name]; dup {
			delete(changes, name)
			errs[name] = kafkaErrorf(kerr.DuplicateResource, "a user's credentials can be altered only once per request")
			return
		}
		order = append(order, name)
		if err != nil {
			errs[name] = err
			return
		}
		changes[name] = ch
	}
	for _, d := range req.Deletions {
		ch := meta.ScramCredentialChanged{User: d.Name, Mechanism: meta.ScramMechanism(d.Mechanism), Delete: true}
		err := checkScramName(d.Name, d.Mechanism)
		if err == nil {
			if _, ok := b.meta.ScramCredential(d.Name, ch.Mechanism); !ok {
				err = kafkaErrorf(kerr.ResourceNotFound, "user %q has no %s credential to delete", d.Name, ch.Mechanism)
			}
		}
		note(d.Name, ch, err)
	}
	for _, u := range req.Upsertions {
		mech := meta.ScramMechanism(u.Mechanism)
		err := checkScramName(u.Name, u.Mechanism)
		switch {
		case err != nil:
		case u.Iterations < meta.ScramMinIterations:
			err = kafkaErrorf(kerr.UnacceptableCredential, "too few iterations: %d, at least %d", u.Iterations, meta.ScramMinIterations)
		case u.Iterations > meta.ScramMaxIterations:
			err = kafkaErrorf(kerr.UnacceptableCredential, "too many iterations: %d, at most %d", u.Iterations, meta.ScramMaxIterations)
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			err = kafkaErrorf(kerr.UnacceptableCredential, "empty salt or salted password")
		}
		var ch meta.ScramCredentialChanged
		if err == nil {
			stored, server := scramKeys(mech, u.SaltedPassword)
			ch = meta.ScramCredentialChanged{User: u.Name, Mechanism: mech, Iterations: u.Iterations,
				Salt: append([]byte(nil), u.Salt...), StoredKey: stored, ServerKey: server}
		}
		note(u.Name, ch, err)
	}
	var batch []meta.ScramCredentialChanged
	var names []string
	for _, name := range order {
		if ch, ok := changes[name]; ok {
			batch = append(batch, ch)
			names = append(names, name)
		}
	}
	if len(batch) > 0 {
		merrs, err := b.meta.AlterScramCredentials(batch)
		for i, name := range names {
			e := err
			if e == nil {
				e = merrs[i]
			}
			if e != nil {
				errs[name] = scramMetaErr(e)
			}
		}
		b.logger.Info("sluice: SCRAM credentials altered", "changes", len(batch))
	}
	for _, name := range order {
		result(name, errs[name])
	}
	return resp, nil
}

// checkScramName checks a credential's user name and mechanism.
func checkScramName(name string, mech int8) error {
	if name == "" {
		return kafkaErrorf(kerr.UnacceptableCredential, "the user name must not be empty")
	}
	if m := meta.ScramMechanism(mech); m != meta.ScramSHA256 && m != meta.ScramSHA512 {
		return kafkaErrorf(kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", mech)
	}
	return nil
}

// scramMetaErr maps the metadata's refusal of a credential change.
func scramMetaErr(err error) error {
	switch {
	case errors.Is(err, meta.ErrInvalidScram):
		return kafkaErrorf(kerr.UnacceptableCredential, "%v", err)
	case errors.Is(err, meta.ErrUnknownScram):
		return kafkaErrorf(kerr.ResourceNotFound, "%v", err)
	}
	return err
}

// scramSettled reports whether this broker's metadata shows a forwarded
// change's successful results: upserted credentials present, deleted ones
// gone (iterations compared; a concurrent change may leave it unsettled,
// which the wait bounds).
func (b *Broker) scramSettled(req *kmsg.AlterUserSCRAMCredentialsRequest, r kmsg.Response) bool {
	resp, ok := r.(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !ok {
		return true
	}
	okUser := map[string]bool{}
	for _, res := range resp.Results {
		okUser[res.User] = res.ErrorCode == 0
	}
	for _, d := range req.Deletions {
		if _, there := b.meta.ScramCredential(d.Name, meta.ScramMechanism(d.Mechanism)); okUser[d.Name] && there {
			return false
		}
	}
	for _, u := range req.Upsertions {
		c, there := b.meta.ScramCredential(u.Name, meta.ScramMechanism(u.Mechanism))
		if okUser[u.Name] && (!there || c.Iterations != u.Iterations || string(c.Salt) != string(u.Salt)) {
			return false
		}
	}
	return true
}
