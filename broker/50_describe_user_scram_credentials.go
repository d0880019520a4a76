package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeUserScramCredentials (key 50), version 0: each user's SCRAM
// mechanisms and iteration counts from this broker's metadata image, as
// Kafka's ScramImage.describe answers: a null or empty user list means
// every user with a credential; a user named twice answers
// DUPLICATE_RESOURCE, one without any credential RESOURCE_NOT_FOUND, each
// with Kafka's message. Salts and keys are never sent.
func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	if denied := s.clusterDenied(r, authz.OpDescribe); denied != nil {
		return respond(denied)
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	img := s.meta.Image()
	var users []string
	named := map[string]int{} // how often the request names each user
	if len(req.Users) == 0 {
		users = img.ScramUsers()
	} else {
		for _, u := range req.Users {
			if named[u.Name] == 0 {
				users = append(users, u.Name)
			}
			named[u.Name]++
		}
	}
	for _, user := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		switch creds := img.ScramCredentials(user); {
		case named[user] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = new("Cannot describe SCRAM credentials for the same user twice in a single request: " + user)
		case len(creds) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = new("Attempt to describe a user credential that does not exist: " + user)
		default:
			for _, c := range creds {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = c.Mechanism, c.Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return respond(resp)
}
