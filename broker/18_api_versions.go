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
// metadata.version-independent features it really implements: none yet,
// since clients pick protocols (transactions v2, the consumer group
// protocol) from them.
func init() { register(18, 0, 4, handleApiVersions) }

func handleApiVersions(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ApiVersionsRequest)
	resp := s.apiVersionsResponse(req.Version)
	return respond(resp)
}

func (s *Server) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	resp.ApiKeys = s.versions.Keys()
	if version >= 3 {
		// No finalized features yet; the epoch -1 says so, as a broker
		// without a finalized metadata.version would.
		resp.FinalizedFeaturesEpoch = -1
	}
	return resp
}
