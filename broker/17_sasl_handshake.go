package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17), versions 0-1.
//
// On a SASL listener the handshake is part of the exchange that runs
// before any other request is read (sasl_auth.go), and again when a
// SaslHandshake re-authenticates a connection whose session has an end
// (KIP-368, sasl_reauth.go). A SaslHandshake that reaches this handler
// came on a PLAINTEXT or SSL listener, on a connection whose session has
// no end, or within a second of its last re-authentication; as Kafka's
// KafkaApis, it is answered ILLEGAL_SASL_STATE.
func init() { register(apiKeySaslHandshake, 0, 1, handleSaslHandshake) }

const apiKeySaslHandshake = 17

func handleSaslHandshake(_ *Server, r *request) (result, error) {
	resp := r.req.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return respond(resp)
}
