package broker

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFindCoordinatorWhileInternalTopicIsCreated: on a fresh broker many
// clients look for their coordinators at once. One request creates the
// internal topic; the others come while that creation is in flight (the
// controller answers them TOPIC_ALREADY_EXISTS) and must still find the
// coordinator rather than answer COORDINATOR_NOT_AVAILABLE, because this
// node's metadata image holds the topic a moment later.
func TestFindCoordinatorWhileInternalTopicIsCreated(t *testing.T) {
	for _, keyType := range []int8{coordinatorGroup, coordinatorTxn} {
		t.Run(fmt.Sprint("key_type_", keyType), func(t *testing.T) {
			ts := startServer(t, "")
			const clients = 8
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for i := range clients {
				cl := ts.client(t)
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := kmsg.NewPtrFindCoordinatorRequest()
					req.Version = 4
					req.CoordinatorType = keyType
					req.CoordinatorKeys = []string{fmt.Sprintf("key-%d", i)}
					resp, err := req.RequestWith(testContext(t), cl)
					switch {
					case err != nil:
						errs <- err
					case len(resp.Coordinators) != 1:
						errs <- fmt.Errorf("client %d: %d coordinators", i, len(resp.Coordinators))
					case resp.Coordinators[0].ErrorCode != 0:
						errs <- fmt.Errorf("client %d: %v", i, kerr.ErrorForCode(resp.Coordinators[0].ErrorCode))
					case resp.Coordinators[0].NodeID != 1:
						errs <- fmt.Errorf("client %d: coordinator node %d", i, resp.Coordinators[0].NodeID)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
