package server

// ApiVersions, versions 0-4. v1 adds throttle time; v3 is flexible and
// carries the client's software name and version (KIP-511); an
// unsupported version is answered with UNSUPPORTED_VERSION and our version
// list in a v0 response, so the client can retry with one we support.
// v3+ lists the features: transaction.version, supported 0-2 and
// finalized at 2, as a Kafka 4.x cluster formatted fresh (KIP-890 part 2:
// clients then let Produce v12 add partitions to a transaction, skip
// AddOffsetsToTxn before TxnOffsetCommit v5, and bump the epoch with every
// EndTxn v5; DESIGN.md, "Transactions").

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 18, minVersion: 0, maxVersion: 4, serve: serveApiVersions})
}

func apiKeys(b *Broker, cc *clientConn) []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, h := range sortedHandlers() {
		if !h.served(b, cc) {
			continue
		}
		oldest := h.minVersion
		if h.listedFromV0 {
			oldest = 0
		}
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: h.key, MinVersion: oldest, MaxVersion: h.maxVersion})
	}
	return keys
}

func serveApiVersions(_ context.Context, b *Broker, cc *clientConn, req kmsg.Request) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiKeys(b, cc)
	if resp.Version >= 3 {
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "transaction.version", MinVersion: 0, MaxVersion: 2}}
		resp.FinalizedFeaturesEpoch = 1
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2}}
	}
	return resp, nil
}

func apiVersionsUnsupported(b *Broker, cc *clientConn) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeys(b, cc)
	return resp
}
