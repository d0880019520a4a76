package controller

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"hash"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// apiAlterUserScramCredentials is AlterUserScramCredentials' API key.
const apiAlterUserScramCredentials byte = 51

// AlterUserScramCredentials decides Kafka's AlterUserScramCredentials as
// its ScramControlManager does: each user may be named once in the
// request (else DUPLICATE_RESOURCE), a deletion needs an existing
// credential (RESOURCE_NOT_FOUND), a mechanism must be SCRAM-SHA-256 or
// SCRAM-SHA-512 (UNSUPPORTED_SASL_MECHANISM), a name non-empty and the
// iterations between 4096 and 16384 (UNACCEPTABLE_CREDENTIAL). The
// salted password the client sent is turned into the stored and server
// keys here, so that the log never holds it. The accepted changes commit
// as one log entry; a failed commit fails every user.
func (c *Controller) AlterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	var resp *kmsg.AlterUserSCRAMCredentialsResponse
	if err := c.do(ctx, func() { resp = c.alterUserScramCredentials(req) }); err != nil {
		return failedScramResponse(req, err)
	}
	return resp
}

// scramMinIterations and scramMaxIterations are Kafka's bounds: the
// mechanisms' minimum, ScramControlManager.MAX_ITERATIONS.
const (
	scramMinIterations = 4096
	scramMaxIterations = 16384
)

func (c *Controller) alterUserScramCredentials(req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	if !c.node.IsLeader() {
		return failedScramResponse(req, notController())
	}
	img := c.node.Image()
	var (
		deletions = map[string]kmsg.AlterUserSCRAMCredentialsRequestDeletion{}
		upserts   = map[string]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{}
		failed    = map[string]error{}
		order     []string // users in the order the request names them
	)
	seen := func(user string) {
		if _, ok := failed[user]; ok {
			return
		}
		if _, ok := deletions[user]; ok {
			return
		}
		if _, ok := upserts[user]; ok {
			return
		}
		order = append(order, user)
	}
	duplicate := apiError(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
	for _, d := range req.Deletions {
		if _, ok := failed[d.Name]; ok {
			continue
		}
		seen(d.Name)
		if _, ok := deletions[d.Name]; ok {
			delete(deletions, d.Name)
			failed[d.Name] = duplicate
			continue
		}
		if err := validateScramUser(d.Name, d.Mechanism); err != nil {
			failed[d.Name] = err
			continue
		}
		if _, ok := img.ScramCredential(d.Name, d.Mechanism); !ok {
			failed[d.Name] = apiError(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			continue
		}
		deletions[d.Name] = d
	}
	for _, u := range req.Upsertions {
		if _, ok := failed[u.Name]; ok {
			continue
		}
		seen(u.Name)
		_, del := deletions[u.Name]
		_, up := upserts[u.Name]
		if del || up {
			delete(deletions, u.Name)
			delete(upserts, u.Name)
			failed[u.Name] = duplicate
			continue
		}
		if err := validateScramUser(u.Name, u.Mechanism); err != nil {
			failed[u.Name] = err
			continue
		}
		switch {
		case u.Iterations < scramMinIterations:
			failed[u.Name] = apiError(kerr.UnacceptableCredential, "Too few iterations")
			continue
		case u.Iterations > scramMaxIterations:
			failed[u.Name] = apiError(kerr.UnacceptableCredential, "Too many iterations")
			continue
		}
		upserts[u.Name] = u
	}

	var recs []image.Record
	var done []string
	for _, user := range order {
		if d, ok := deletions[user]; ok {
			recs = append(recs, &image.RemoveUserScramCredentialRecord{Name: user, Mechanism: d.Mechanism})
			done = append(done, user)
		}
	}
	for _, user := range order {
		u, ok := upserts[user]
		if !ok {
			continue
		}
		if len(u.SaltedPassword) == 0 {
			// Java's Mac refuses an empty key, which Kafka answers
			// as an unknown error with its message.
			failed[user] = apiError(kerr.UnknownServerError, "Empty key")
			continue
		}
		h := sha256.New
		if u.Mechanism == image.ScramSHA512 {
			h = sha512.New
		}
		storedKey, serverKey := scramKeys(h, u.SaltedPassword)
		recs = append(recs, &image.UserScramCredentialRecord{
			Name: user, Mechanism: u.Mechanism, Salt: u.Salt,
			StoredKey: storedKey, ServerKey: serverKey, Iterations: u.Iterations,
		})
		done = append(done, user)
	}
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	if len(recs) > 0 {
		if err := c.propose(recs); err != nil {
			return failedScramResponse(req, err)
		}
	}
	for _, user := range done {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		resp.Results = append(resp.Results, r)
	}
	for _, user := range order {
		if err, ok := failed[user]; ok {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User = user
			r.ErrorCode, r.ErrorMessage = kafkaErr(err)
			resp.Results = append(resp.Results, r)
		}
	}
	return resp
}

func validateScramUser(name string, mechanism int8) error {
	if name == "" {
		return apiError(kerr.UnacceptableCredential, "Username must not be empty")
	}
	if image.ScramMechanismName(mechanism) == "" {
		return apiError(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
	}
	return nil
}

// scramKeys derives RFC 5802's StoredKey, H(HMAC(SaltedPassword, "Client
// Key")), and ServerKey, HMAC(SaltedPassword, "Server Key"), as Kafka's
// ScramFormatter does. (security.CredentialFromSaltedPassword is the same
// for the broker's side; the controller sits below that package.)
func scramKeys(h func() hash.Hash, salted []byte) (storedKey, serverKey []byte) {
	mac := hmac.New(h, salted)
	mac.Write([]byte("Client Key"))
	d := h()
	d.Write(mac.Sum(nil))
	mac = hmac.New(h, salted)
	mac.Write([]byte("Server Key"))
	return d.Sum(nil), mac.Sum(nil)
}

// failedScramResponse answers err for every user the request names.
func failedScramResponse(req *kmsg.AlterUserSCRAMCredentialsRequest, err error) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	code, msg := kafkaErr(err)
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode, r.ErrorMessage = user, code, msg
		resp.Results = append(resp.Results, r)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp
}

// alterUserScramCredentialsRPC carries Kafka's own request and answer, at
// their only version.
var alterUserScramCredentialsRPC = &rpc[*kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.AlterUserSCRAMCredentialsResponse]{
	api: apiAlterUserScramCredentials,
	serve: func(ctx context.Context, c *Controller, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
		return c.AlterUserScramCredentials(ctx, req)
	},
	notController: func(resp *kmsg.AlterUserSCRAMCredentialsResponse) bool {
		for _, r := range resp.Results {
			if r.ErrorCode == kerr.NotController.Code {
				return true
			}
		}
		return false
	},
	failed: failedScramResponse,
	codec: kafkaCodec[*kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.AlterUserSCRAMCredentialsResponse,
		*kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.AlterUserSCRAMCredentialsResponse]{
		version: 0,
		newReq:  kmsg.NewPtrAlterUserSCRAMCredentialsRequest,
		newResp: kmsg.NewPtrAlterUserSCRAMCredentialsResponse,
		toReq:   func(r *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsRequest { return r },
		fromReq: func(r *kmsg.AlterUserSCRAMCredentialsRequest) (*kmsg.AlterUserSCRAMCredentialsRequest, error) {
			return r, nil
		},
		toResp: func(r *kmsg.AlterUserSCRAMCredentialsResponse) *kmsg.AlterUserSCRAMCredentialsResponse { return r },
		fromResp: func(r *kmsg.AlterUserSCRAMCredentialsResponse) (*kmsg.AlterUserSCRAMCredentialsResponse, error) {
			return r, nil
		},
	},
}

// AlterUserScramCredentials implements API.
func (c *Client) AlterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	return invoke(ctx, c, alterUserScramCredentialsRPC, req)
}
