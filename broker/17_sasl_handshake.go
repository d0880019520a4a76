package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17), versions 0-1.
//
// On a SASL listener the handshake is part of the exchange that runs
// before any other request is read (sasl_auth.go). A SaslHandshake that
// reaches this handler came on a PLAINTEXT or SSL listener, or after the
// connection authenticated; as Kafka's KafkaApis, it is answered
// ILLEGAL_SASL_STATE (re-authentication, KIP-368, is not served).
func init() { register(apiKeySaslHandshake, 0, 1, handleSaslHandshake) }

const apiKeySaslHandshake = 17

func handleSaslHandshake(_ *Server, r *request) (result, error) {
	resp := r.req.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return respond(resp)
}
