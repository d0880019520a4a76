package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// AlterConfigs (key 33), versions 0-2: the legacy form, which replaces a
// topic's whole set of overrides with the request's (configs it does not
// name go back to their defaults). Otherwise as IncrementalAlterConfigs.
func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	dup := duplicateResources(len(req.Resources), func(i int) (int8, string) {
		return int8(req.Resources[i].ResourceType), req.Resources[i].ResourceName
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var ops []configOp
		for _, c := range rr.Configs {
			ops = append(ops, configOp{name: c.Name, op: opSet, value: c.Value})
		}
		err := errDuplicateResource
		if !dup[i] {
			err = s.auth(r).alterConfigsDenied(rr.ResourceType, rr.ResourceName)
		}
		if err == nil {
			err = s.alterConfigs(rr.ResourceType, rr.ResourceName, ops, true, req.ValidateOnly)
		}
		setAlterErr(&sr.ErrorCode, &sr.ErrorMessage, err)
		resp.Resources = append(resp.Resources, sr)
	}
	return respond(resp)
}
