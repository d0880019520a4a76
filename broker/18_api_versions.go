package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ApiVersions (key 18), versions 0-4.
//
// Answers the table every other file registers, so what is advertised is
// exactly what is served. A request of a version above 4 never reaches
// this handler: the connection answers it in the v0 form with
// UNSUPPORTED_VERSION (see conn.handleFrame), as Kafka does, so newer
// clients retry with a version we know.
//
// v3+ carries the finalized features of KIP-584. Gregor advertises only
// features it really implements, since clients pick protocols from them:
// group.version 1 (the KIP-848 consumer group protocol),
// transaction.version 2 (KIP-890 part 2: producers skip
// AddPartitionsToTxn and AddOffsetsToTxn, and every EndTxn bumps the
// epoch), share.version 1 (KIP-932 share groups, broker/share) and
// streams.version 1 (KIP-1071 streams groups, StreamsGroupHeartbeat and
// StreamsGroupDescribe), each finalized at its highest level as on a new
// Kafka 4.2+ cluster,
// metadata.version at Kafka 4.0's level (share.version 1 depends on no
// metadata.version in Kafka's ShareVersion), and kraft.version 0 (a static
// quorum, supported but not finalized, as Kafka lists it). As Kafka
// (KAFKA-17492), a v3 answer leaves out the supported
// features whose minimum is 0, which older clients fail to parse.
func init() { register(18, 0, 4, handleApiVersions) }

func handleApiVersions(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ApiVersionsRequest)
	resp := s.apiVersionsResponse(req.Version)
	return respond(resp)
}

// unsupportedApiVersionsResponse answers an ApiVersions of a version this
// build does not serve, as Kafka does since KIP-511: the v0 form with
// UNSUPPORTED_VERSION and, of the table, only ApiVersions' own range, so
// the client retries at the highest version both know (and learns the
// features then).
func (s *Server) unsupportedApiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = errUnsupportedVersion
	for _, k := range s.versions.Keys() {
		if k.ApiKey == apiKeyApiVersions {
			resp.ApiKeys = append(resp.ApiKeys, k)
		}
	}
	return resp
}

func (s *Server) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	resp.ApiKeys = s.versions.Keys()
	if version >= 3 {
		for _, f := range features {
			if version >= 4 || f.min > 0 {
				sf := kmsg.NewApiVersionsResponseSupportedFeature()
				sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
				resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			}
			if f.level == 0 {
				// As Kafka: a feature at level 0 is not finalized.
				continue
			}
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.level, f.level
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
		// The features are fixed by the build, not changed at run time
		// (no UpdateFeatures yet), so their epoch never moves.
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp
}

// transactionVersion is the transaction.version level the cluster runs
// at; the transaction coordinator uses it for the transactions it ends
// itself (timeouts, fencing) and for the format of its records.
const transactionVersion = 2

// features are the KIP-584 features this build implements, with the
// level it runs at.
var features = []struct {
	name     string
	min, max int16
	level    int16
}{
	{"group.version", 0, 1, 1},
	// kraft.version 1 is KIP-853's dynamic quorum (AddRaftVoter,
	// RemoveRaftVoter, voters kept in the log); Gregor's quorum (etcd
	// raft) has a fixed voter set, as KRaft at level 0, which Kafka does
	// not list as finalized.
	{"kraft.version", 0, 0, 0},
	// metadata.version 4.0-IV3 (level 25), Kafka 4.0's release level: the
	// first at which transaction.version 2 (needs 4.0-IV2) and
	// group.version 1 (4.0-IV0) may be finalized. Later levels (4.1-IV0
	// on) make streams.version and share.version 1 defaults, which Gregor
	// finalizes itself. Gregor runs at this one level only (no
	// UpdateFeatures), so it is its whole supported range.
	{"metadata.version", metadataVersion, metadataVersion, metadataVersion},
	{"transaction.version", 0, 2, transactionVersion},
	{"share.version", 0, 1, 1},
	// streams.version 1 tells Kafka Streams clients (group.protocol=
	// streams) that StreamsGroupHeartbeat is served.
	{"streams.version", 0, 1, 1},
}

// metadataVersion is the metadata.version feature level Gregor runs at
// (Kafka's MetadataVersion.IBP_4_0_IV3).
const metadataVersion = 25
