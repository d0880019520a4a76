package config

import "slices"

// ServedSecurityProtocols are the security protocols Gregor serves. A
// listener mapped to any other protocol is refused at start: serving it in
// plaintext would hand unauthenticated clients what its operator meant to
// protect.
var ServedSecurityProtocols = []string{"PLAINTEXT"}

// checkServedProtocols refuses a configuration in which a listener that is
// used (listeners, advertised.listeners, controller.listener.names or the
// inter-broker listener) maps to a protocol Gregor does not serve yet. It
// runs after Kafka's own checks, which it does not replace.
func (b *Broker) checkServedProtocols(props map[string]string) error {
	var used []string
	add := func(name string) {
		if name != "" && !slices.Contains(used, name) {
			used = append(used, name)
		}
	}
	for _, l := range b.Listeners {
		add(l.Name)
	}
	for _, l := range b.AdvertisedListeners {
		add(l.Name)
	}
	for _, n := range b.ControllerListenerNames {
		add(n)
	}
	add(b.InterBrokerListenerName)
	for _, name := range used {
		proto, ok := b.ListenerSecurityProtocolMap[name]
		if !ok || slices.Contains(ServedSecurityProtocols, proto) {
			continue
		}
		return invalid("listener.security.protocol.map", b.rawOrDefault(props, "listener.security.protocol.map"),
			"listener %s uses security protocol %s, which gregor does not serve yet (only %v): start-up refused rather than serve it without %s",
			name, proto, ServedSecurityProtocols, protectionOf(proto))
	}
	return nil
}

// protectionOf names what a security protocol would have given.
func protectionOf(proto string) string {
	switch proto {
	case "SSL":
		return "encryption"
	case "SASL_PLAINTEXT":
		return "authentication"
	}
	return "authentication and encryption"
}
