package config

import "slices"

// ServedSecurityProtocols are the security protocols Gregor serves on a
// client listener.
var ServedSecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// checkServedProtocols refuses a configuration in which a listener Gregor
// itself connects to, a controller listener (controller.listener.names)
// or the inter-broker listener, maps to a protocol other than PLAINTEXT:
// the broker's own connections (the metadata quorum, replica fetchers,
// transaction markers) do not speak TLS or SASL yet, and serving such a
// listener in plaintext would hand unauthenticated peers what its operator
// meant to protect. Client listeners may use any protocol. It runs after
// Kafka's own checks, which it does not replace.
func (b *Broker) checkServedProtocols(props map[string]string) error {
	var used []string
	add := func(name string) {
		if name != "" && !slices.Contains(used, name) {
			used = append(used, name)
		}
	}
	for _, n := range b.ControllerListenerNames {
		add(n)
	}
	add(b.InterBrokerListenerName)
	for _, name := range used {
		proto, ok := b.ListenerSecurityProtocolMap[name]
		if !ok || proto == "PLAINTEXT" {
			continue
		}
		role := "the inter-broker listener"
		if slices.Contains(b.ControllerListenerNames, name) {
			role = "a controller listener"
		}
		return invalid("listener.security.protocol.map", b.rawOrDefault(props, "listener.security.protocol.map"),
			"listener %s uses security protocol %s, which gregor does not serve yet on %s (brokers and controllers connect to each other in PLAINTEXT only): start-up refused rather than serve it without %s",
			name, proto, role, protectionOf(proto))
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
