package server

// DescribeUserScramCredentials, version 0 (KIP-554; flexible), from this
// broker's metadata: each user's mechanisms and iteration counts, never
// salts or keys. No users (null or empty) describes every user with a
// credential; a user named twice is DUPLICATE_RESOURCE, a user without
// credentials RESOURCE_NOT_FOUND, each in its own result, as Kafka's
// ScramImage.describe.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 50, minVersion: 0, maxVersion: 0, serve: serveDescribeUserScramCredentials})
}

func serveDescribeUserScramCredentials(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	users := b.meta.ScramUsers()
	describe := func(name string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		for _, c := range users[name] {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = int8(c.Mechanism), c.Iterations
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		return r
	}
	if len(req.Users) == 0 {
		names := make([]string, 0, len(users))
		for n := range users {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			resp.Results = append(resp.Results, describe(n))
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range req.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		r := describe(u.Name)
		var err error
		switch {
		case count[u.Name] > 1:
			err = kafkaErrorf(kerr.DuplicateResource, "user %q is named more than once", u.Name)
		case len(users[u.Name]) == 0:
			err = kafkaErrorf(kerr.ResourceNotFound, "user %q has no SCRAM credentials", u.Name)
		}
		if err != nil {
			r.CredentialInfos = nil
			r.ErrorCode, r.ErrorMessage = kafkaCode(err), errMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
