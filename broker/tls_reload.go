package broker

import (
	"fmt"
	"maps"
	"strings"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/security"
)

// listenerStores picks from a broker's dynamic configs the key and trust
// store properties of one listener.
func listenerStores(dyn map[string]string, listener string) map[string]string {
	out := map[string]string{}
	for k, v := range dyn {
		if l, ok := config.ListenerStoreKey(k); ok && strings.EqualFold(l, listener) {
			out[k] = v
		}
	}
	return out
}

// checkListenerStores loads the key and trust stores each TLS listener
// would have with this broker's dynamic configs next, as Kafka's
// SslFactory.validateReconfiguration does before it accepts a change, so
// a store that does not load is refused and the current one stays.
// Only the listeners whose properties ops name are checked.
func (s *Server) checkListenerStores(next map[string]string, named map[string]bool) error {
	for name, sec := range s.security {
		if sec.tls == nil || !named[strings.ToLower(name)] {
			continue
		}
		ls, err := s.cfg.DynamicListenerSecurity(name, next)
		if err != nil {
			return fmt.Errorf("listener %s: %w", name, err)
		}
		if _, err := security.ServerTLS(ls); err != nil {
			return err
		}
	}
	return nil
}

// reloadListenerTLS rebuilds the TLS config of the TLS listeners from
// the static properties and this broker's dynamic configs dyn: those
// whose dynamic store properties differ from the ones applied, and,
// with force, those forced names (a change that set a store property to
// its current value re-reads the files, as Kafka's
// reloadUpdatedFilesWithoutConfigChange does). New handshakes use the
// new config; open connections keep theirs. A store that no longer loads
// leaves the listener on its current config and is logged.
func (s *Server) reloadListenerTLS(dyn map[string]string, force map[string]bool) {
	for name, sec := range s.security {
		if sec.tls == nil {
			continue
		}
		stores := listenerStores(dyn, name)
		sec.reloadMu.Lock()
		if maps.Equal(stores, sec.stores) && !force[strings.ToLower(name)] {
			sec.reloadMu.Unlock()
			continue
		}
		err := s.reloadOne(name, sec, dyn)
		if err == nil {
			sec.stores = stores
		}
		sec.reloadMu.Unlock()
		if err != nil {
			s.log.Error("reload listener key and trust stores: keeping the current ones", "listener", name, "err", err)
			continue
		}
		s.log.Info("reloaded listener key and trust stores", "listener", name)
	}
}

// reloadOne builds one listener's TLS config and swaps it in.
func (s *Server) reloadOne(name string, sec *listenerSecurity, dyn map[string]string) error {
	ls, err := s.cfg.DynamicListenerSecurity(name, dyn)
	if err != nil {
		return fmt.Errorf("listener %s: %w", name, err)
	}
	t, err := security.ServerTLS(ls)
	if err != nil {
		return err
	}
	sec.cur.Store(t)
	return nil
}
