package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36), versions 0-2.
//
// Its tokens are exchanged before any other request is read on a SASL
// listener (sasl_auth.go). One that reaches this handler came on a
// listener without SASL or after authentication, and is answered
// ILLEGAL_SASL_STATE with Kafka's message.
func init() { register(apiKeySaslAuthenticate, 0, 2, handleSaslAuthenticate) }

const apiKeySaslAuthenticate = 36

func handleSaslAuthenticate(_ *Server, r *request) (result, error) {
	resp := r.req.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication"
	resp.ErrorMessage = &msg
	return respond(resp)
}
