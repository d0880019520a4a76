package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

func quotaEntry(parts [][2]*string, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range parts {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = *p[0], p[1]
		e.Entity = append(e.Entity, ent)
	}
	e.Ops = ops
	return e
}

func quotaOp(key string, v float64, remove bool) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value, op.Remove = key, v, remove
	return op
}

func TestAlterClientQuotas(t *testing.T) {
	n, c := startController(t, t.TempDir())
	user, client, ip := strp("user"), strp("client-id"), strp("ip")
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		quotaEntry([][2]*string{{user, strp("alice")}}, quotaOp("producer_byte_rate", 1024, false), quotaOp("consumer_byte_rate", 2048, false)),
		quotaEntry([][2]*string{{user, nil}, {client, strp("app")}}, quotaOp("producer_byte_rate", 4096, false)),
		quotaEntry(nil, quotaOp("producer_byte_rate", 1, false)),
		quotaEntry([][2]*string{{strp("group"), strp("g")}}, quotaOp("producer_byte_rate", 1, false)),
		quotaEntry([][2]*string{{user, strp("")}}, quotaOp("producer_byte_rate", 1, false)),
		quotaEntry([][2]*string{{user, strp("bob")}}, quotaOp("producer_byte_rate", 1.5, false)),
		quotaEntry([][2]*string{{user, strp("carol")}}, quotaOp("producer_byte_rate", 0, false)),
		quotaEntry([][2]*string{{user, strp("dave")}}, quotaOp("fetch_rate", 10, false)),
		quotaEntry([][2]*string{{ip, strp("10.0.0.9")}}, quotaOp("connection_creation_rate", 10, false)),
		quotaEntry([][2]*string{{ip, strp("10.0.0.1")}, {user, strp("x")}}, quotaOp("connection_creation_rate", 1, false)),
		quotaEntry([][2]*string{{user, strp("frank")}}, quotaOp("producer_byte_rate", 1, false), quotaOp("producer_byte_rate", 2, false)),
	}
	resp := c.AlterClientQuotas(ctxT(t), req)
	want := []struct {
		code int16
		msg  string
	}{
		{0, ""}, {0, ""},
		{kerr.InvalidRequest.Code, "Invalid empty client quota entity"},
		{kerr.InvalidRequest.Code, "Unhandled client quota entity type: group"},
		{kerr.InvalidRequest.Code, "Empty user not supported"},
		{kerr.InvalidRequest.Code, "producer_byte_rate cannot be a fractional value."},
		{kerr.InvalidRequest.Code, "Quota producer_byte_rate must be greater than 0"},
		{kerr.InvalidRequest.Code, "Invalid configuration key fetch_rate"},
		{0, ""},
		{kerr.InvalidRequest.Code, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
		{kerr.InvalidRequest.Code, "Ignoring duplicate entity ClientQuotaEntity(entries={user=frank})"},
	}
	if len(resp.Entries) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(resp.Entries), len(want), resp.Entries)
	}
	for i, w := range want {
		e := resp.Entries[i]
		msg := ""
		if e.ErrorMessage != nil {
			msg = *e.ErrorMessage
		}
		if e.ErrorCode != w.code || (w.code != 0 && msg != w.msg) {
			t.Errorf("entry %d: %d %q, want %d %q", i, e.ErrorCode, msg, w.code, w.msg)
		}
	}
	img := n.Image()
	alice, _ := image.QuotaEntityOf([]image.QuotaEntityData{{Type: "user", Name: strp("alice")}})
	if q := img.ClientQuotas(alice); q["producer_byte_rate"] != 1024 || q["consumer_byte_rate"] != 2048 {
		t.Fatalf("alice's quotas %v", q)
	}
	// alice, user=<default>+client-id=app and ip=10.0.0.9.
	if got := len(img.QuotaEntities()); got != 3 {
		t.Fatalf("%d entities with quotas, want 3", got)
	}

	// Removing, validate-only, and an entity named twice.
	req = kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		quotaEntry([][2]*string{{user, strp("alice")}}, quotaOp("producer_byte_rate", 0, true)),
	}
	if r := c.AlterClientQuotas(ctxT(t), req); r.Entries[0].ErrorCode != 0 {
		t.Fatalf("remove: %+v", r.Entries)
	}
	if q := n.Image().ClientQuotas(alice); len(q) != 1 || q["consumer_byte_rate"] != 2048 {
		t.Fatalf("alice's quotas after remove %v", q)
	}
	req.ValidateOnly = true
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{quotaEntry([][2]*string{{user, strp("alice")}}, quotaOp("consumer_byte_rate", 1, false))}
	if r := c.AlterClientQuotas(ctxT(t), req); r.Entries[0].ErrorCode != 0 || n.Image().ClientQuotas(alice)["consumer_byte_rate"] != 2048 {
		t.Fatalf("validate only: %+v, quotas %v", r.Entries, n.Image().ClientQuotas(alice))
	}
}
