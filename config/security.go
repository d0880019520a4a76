package config

import (
	"slices"
	"strings"
)

// ServedSecurityProtocols are the security protocols Gregor serves on a
// listener, client, inter-broker or controller.
var ServedSecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// Inter-node security: how this node connects to the listeners of the
// others (the inter-broker listener for replica fetches, transaction
// markers and KIP-890 verifications; the first controller listener for
// the metadata quorum and the brokers' controller calls). As in Kafka,
// the client side of such a connection reads the target listener's own
// settings: the listener.name.<name>.ssl.* trust store verifies the peer
// and its key store is presented for mutual TLS, and the SASL mechanism
// is sasl.mechanism.inter.broker.protocol or
// sasl.mechanism.controller.protocol, with the username and password
// options of that listener's JAAS config for the mechanism.

// peerSecurityKeys are the inter-node settings that are not listener
// properties.
var peerSecurityKeys = []brokerKey{
	{name: "sasl.mechanism.controller.protocol", typ: TypeString, dflt: "GSSAPI",
		doc: "The SASL mechanism used to connect to controllers (the quorum between controllers, and brokers to controllers) when the controller listener is SASL_PLAINTEXT or SASL_SSL: PLAIN (SCRAM credentials live in the metadata log the controllers replicate over that listener, so SCRAM is refused here)."},
}

// PeerSecurity is how this node connects to one listener of the other
// nodes.
type PeerSecurity struct {
	Listener string // upper-cased listener name
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL

	// SSL holds the listener's ssl.* settings, read as a client: the
	// trust store the peer's certificate must chain to (none: the
	// system's roots) and the key store presented to it (none: no client
	// certificate).
	SSL SSLSettings
	// VerifyHostname is ssl.endpoint.identification.algorithm=https: the
	// peer's certificate must name the host dialled.
	VerifyHostname bool

	// Mechanism is the SASL mechanism, and MechanismKey the property that
	// chose it.
	Mechanism    string
	MechanismKey string
	// JAAS is the text of JAASKey, the listener's JAAS config for
	// Mechanism, whose username and password options are this node's
	// credentials (security.PeerCredentials reads them).
	JAAS    string
	JAASKey string
}

// TLS reports whether connections to the listener are TLS.
func (p PeerSecurity) TLS() bool { return p.Protocol == "SSL" || p.Protocol == "SASL_SSL" }

// SASL reports whether this node authenticates to the listener with SASL.
func (p PeerSecurity) SASL() bool { return p.Protocol == "SASL_PLAINTEXT" || p.Protocol == "SASL_SSL" }

// InterBrokerSecurity is how this broker connects to the inter-broker
// listener of the others.
func (b *Broker) InterBrokerSecurity() PeerSecurity {
	if p, ok := b.peerSecurity[b.InterBrokerListenerName]; ok {
		return p
	}
	return PeerSecurity{Listener: b.InterBrokerListenerName, Protocol: "PLAINTEXT"}
}

// ControllerSecurity is how this node connects to the controllers: over
// the first of controller.listener.names, as Kafka's brokers and
// controllers do.
func (b *Broker) ControllerSecurity() PeerSecurity {
	if len(b.ControllerListenerNames) == 0 {
		return PeerSecurity{Protocol: "PLAINTEXT"}
	}
	name := b.ControllerListenerNames[0]
	if p, ok := b.peerSecurity[name]; ok {
		return p
	}
	return PeerSecurity{Listener: name, Protocol: "PLAINTEXT"}
}

// derivePeerSecurity resolves the client side of the inter-broker and
// controller listeners and refuses what Gregor cannot do on them: a SASL
// mechanism it has no client for (GSSAPI, Kafka's default), SCRAM to
// controllers, a mechanism the listener this node serves does not enable,
// or a host name verification algorithm other than https or none.
func (b *Broker) derivePeerSecurity(props map[string]string) error {
	b.peerSecurity = map[string]PeerSecurity{}
	// The quorum dials with the first controller listener's settings and
	// serves one controller listener: several of them must agree on the
	// protocol, or a node would dial one the way another is served.
	for _, n := range b.ControllerListenerNames[min(1, len(b.ControllerListenerNames)):] {
		first := b.ControllerListenerNames[0]
		if p, q := b.ListenerSecurityProtocolMap[n], b.ListenerSecurityProtocolMap[first]; p != q {
			return invalid("controller.listener.names", strings.Join(b.ControllerListenerNames, ","),
				"controller listeners %s (%s) and %s (%s) differ in security protocol; gregor connects to controllers with the first one's", first, q, n, p)
		}
	}
	type use struct {
		listener, mechKey, role string
	}
	var uses []use
	if len(b.ControllerListenerNames) > 0 {
		uses = append(uses, use{b.ControllerListenerNames[0], "sasl.mechanism.controller.protocol", "controller"})
	}
	if b.IsBroker() {
		uses = append(uses, use{b.InterBrokerListenerName, "sasl.mechanism.inter.broker.protocol", "inter-broker"})
	}
	for _, u := range uses {
		proto, ok := b.ListenerSecurityProtocolMap[u.listener]
		if !ok || proto == "PLAINTEXT" {
			continue
		}
		p, err := b.resolvePeer(u.listener, proto, u.mechKey, u.role, props)
		if err != nil {
			return err
		}
		b.peerSecurity[u.listener] = p
	}
	return nil
}

func (b *Broker) resolvePeer(listener, proto, mechKey, role string, props map[string]string) (PeerSecurity, error) {
	p := PeerSecurity{Listener: listener, Protocol: proto}
	vals := map[string]resolved{}
	for _, k := range securityKeys {
		r, err := lookup(k.name, listener, props)
		if err != nil {
			return p, err
		}
		vals[k.name] = r
	}
	if p.TLS() {
		s, err := resolveSSL(listener, vals, false)
		if err != nil {
			return p, err
		}
		p.SSL = s
		alg := vals["ssl.endpoint.identification.algorithm"]
		switch strings.ToLower(javaTrim(alg.v.s)) {
		case "https":
			p.VerifyHostname = true
		case "":
		default:
			return p, invalid(alg.name, alg.raw, "listener %s: the %s connections verify host names with https or not at all (empty)", listener, role)
		}
	}
	if !p.SASL() {
		return p, nil
	}
	mk, err := lookupPeerMechanism(mechKey, props)
	if err != nil {
		return p, err
	}
	p.Mechanism, p.MechanismKey = strings.ToUpper(mk.v.s), mk.name
	switch {
	case p.Mechanism == MechanismPlain:
	case role == "inter-broker" && (p.Mechanism == MechanismScramSHA256 || p.Mechanism == MechanismScramSHA512):
	case role == "controller" && (p.Mechanism == MechanismScramSHA256 || p.Mechanism == MechanismScramSHA512):
		return p, invalid(mk.name, mk.raw, "listener %s: SCRAM credentials live in the metadata log, which the controllers replicate over this listener, so gregor cannot check them there; use PLAIN on the controller listener", listener)
	default:
		return p, invalid(mk.name, mk.raw, "listener %s is %s and %s connections to it need a SASL mechanism gregor has a client for: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (controller listener: PLAIN)", listener, proto, role)
	}
	// A node serving the listener must accept its own mechanism, as Kafka
	// requires of sasl.enabled.mechanisms.
	if _, served := listenerNamed(b.Listeners, listener); served {
		en := vals["sasl.enabled.mechanisms"]
		if !slices.Contains(en.v.list, p.Mechanism) {
			return p, invalid(mk.name, mk.raw, "%s must be included in %s (%s) when SASL is used for %s communication", mk.name, en.name, en.raw, role)
		}
	}
	p.JAASKey = listenerPrefix(listener) + strings.ToLower(p.Mechanism) + ".sasl.jaas.config"
	p.JAAS = props[p.JAASKey]
	if javaTrim(p.JAAS) == "" {
		return p, invalid(p.JAASKey, "null", "listener %s: this node's %s credentials are the username and password options of this JAAS config", listener, role)
	}
	return p, nil
}

// lookupPeerMechanism reads a sasl.mechanism.*.protocol property, which
// Kafka does not take per listener.
func lookupPeerMechanism(key string, props map[string]string) (resolved, error) {
	k := brokerKeyIndex[key]
	raw, set := props[key]
	if !set {
		raw = k.dflt
	}
	v, err := parseChecked(key, k.typ, k.check, raw)
	if err != nil {
		return resolved{}, err
	}
	return resolved{v: v, name: key, raw: raw, set: set}, nil
}
