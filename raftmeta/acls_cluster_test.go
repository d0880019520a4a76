package raftmeta

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/security/authz"
)

// TestTCPClusterACLs: ACLs created and deleted through followers reach
// the active controller as Kafka's CreateAcls and DeleteAcls messages over
// TCP, and every node's image then holds the same ACLs, also after the
// controller that wrote them is gone.
func TestTCPClusterACLs(t *testing.T) {
	c := newTCPCluster(t, nil)
	for _, id := range testVoters {
		c.start(id)
	}
	c.waitLeader()
	read := authz.ACL{ResourceType: authz.ResourceTopic, ResourceName: "orders", PatternType: authz.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: authz.OpRead, Permission: authz.PermissionAllow}
	deny := authz.ACL{ResourceType: authz.ResourceGroup, ResourceName: "app-", PatternType: authz.PatternPrefixed,
		Principal: "User:*", Host: "10.0.0.1", Operation: authz.OpAll, Permission: authz.PermissionDeny}
	bad := read
	bad.ResourceName = ""
	errs := c.follower().client.CreateACLs(ctxT(t), []authz.ACL{read, bad, deny})
	if errs[0] != nil || errs[2] != nil || controller.ErrorCode(errs[1]) != kerr.InvalidRequest.Code {
		t.Fatalf("CreateACLs through a follower: %v", errs)
	}
	c.waitConverged()
	for id, tn := range c.nodes {
		all := tn.node.Image().ACLs().All()
		if len(all) != 2 {
			t.Fatalf("node %d holds %d ACLs, want 2", id, len(all))
		}
		got := map[authz.ACL]bool{controller.ACLOf(all[0]): true, controller.ACLOf(all[1]): true}
		if !got[read] || !got[deny] {
			t.Fatalf("node %d holds %+v", id, all)
		}
	}

	// The controller that wrote them goes; the next one deletes one.
	old := c.leader()
	for id, tn := range c.nodes {
		if tn == old {
			c.stop(id, false)
		}
	}
	c.waitLeader()
	app := "app-1"
	res := c.follower().client.DeleteACLs(ctxT(t), []authz.Filter{{
		ResourceType: authz.ResourceGroup, ResourceName: &app, PatternType: authz.PatternMatch,
		Operation: authz.OpAny, Permission: authz.PermissionAny,
	}})
	if len(res) != 1 || res[0].Err != nil || len(res[0].Deleted) != 1 || res[0].Deleted[0] != deny {
		t.Fatalf("DeleteACLs through a follower: %+v", res)
	}
	c.waitConverged()
	for id, tn := range c.nodes {
		if all := tn.node.Image().ACLs().All(); len(all) != 1 || controller.ACLOf(all[0]) != read {
			t.Fatalf("node %d after the delete: %+v", id, all)
		}
	}
}
