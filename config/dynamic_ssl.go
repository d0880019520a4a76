package config

import (
	"maps"
	"strings"
)

// reloadableStoreKeys are the ssl.* properties of a listener Kafka
// reconfigures at run time (DynamicBrokerConfig's
// DynamicSecurityConfigs that SslFactory reloads): the key store and the
// trust store, by file or inline PEM. Setting one, even to its current
// value, re-reads the stores.
var reloadableStoreKeys = []string{
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
	"ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
}

// ListenerStoreKey reports whether name is a listener-prefixed key or
// trust store property (listener.name.<l>.ssl.keystore.location...) and
// returns the listener, lower-cased as Kafka's prefix is.
func ListenerStoreKey(name string) (listener string, ok bool) {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return "", false
	}
	l, key, ok := strings.Cut(rest, ".")
	if !ok || l == "" {
		return "", false
	}
	for _, k := range reloadableStoreKeys {
		if key == k {
			return l, true
		}
	}
	return "", false
}

// isPlainStoreKey reports whether name is a key or trust store property
// without a listener prefix, which Kafka refuses to change at run time.
func isPlainStoreKey(name string) bool {
	for _, k := range reloadableStoreKeys {
		if name == k {
			return true
		}
	}
	return false
}

// DynamicListenerSecurity resolves the security of the named listener
// as the static properties give it, with the listener-prefixed key and
// trust store properties in dyn (this broker's dynamic configs) over
// them, as Kafka's dynamic config overrides its file.
func (b *Broker) DynamicListenerSecurity(listener string, dyn map[string]string) (ListenerSecurity, error) {
	props := maps.Clone(b.Props)
	if props == nil {
		props = map[string]string{}
	}
	for k, v := range dyn {
		if l, ok := ListenerStoreKey(k); ok && strings.EqualFold(l, listener) {
			props[k] = v
		}
	}
	return b.resolveListenerSecurity(listener, props)
}

// securityKey finds an ssl.* or sasl.* key by its unprefixed name.
func securityKey(name string) *brokerKey {
	for i := range securityKeys {
		if securityKeys[i].name == name {
			return &securityKeys[i]
		}
	}
	return nil
}
