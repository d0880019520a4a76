package config

import (
	"slices"
	"strings"
)

// SSL and SASL settings of client listeners. Kafka reads each of them
// first from listener.name.<listener, lower-cased>.<key> and then from
// the plain key, so one broker can serve several TLS or SASL listeners
// with different keystores or mechanisms; ListenerSecurity resolves them.

// SASL mechanisms Gregor can serve (OAUTHBEARER's constant is in
// security_oauth.go). GSSAPI (Kerberos) is refused at start when a SASL
// listener enables it.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// ServedSASLMechanisms are the mechanisms a SASL listener may enable.
var ServedSASLMechanisms = []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismOAuthBearer}

// Keystore and truststore types. JKS, Kafka's default, is Java's own
// format; no maintained Go library reads it, so it is refused at start
// with the keytool command that converts it to PKCS12.
const (
	StoreTypePEM    = "PEM"
	StoreTypePKCS12 = "PKCS12"
	StoreTypeJKS    = "JKS"
)

var tlsProtocols = []string{"TLSv1.2", "TLSv1.3"}

// securityKeys are the SSL and SASL broker properties, Kafka 4.2's names
// and defaults. Each may be overridden per listener (ListenerSecurity).
// The OAUTHBEARER ones are in security_oauth.go.
var securityKeys = append([]brokerKey{
	{name: "ssl.keystore.type", typ: TypeString, dflt: StoreTypeJKS,
		doc: "The format of the key store: PKCS12 or PEM. Kafka's default, JKS, is refused at start (convert the store with keytool -importkeystore -deststoretype PKCS12)."},
	{name: "ssl.keystore.location", typ: TypeString, null: true,
		doc: "The key store file: the broker's certificate chain and private key."},
	{name: "ssl.keystore.password", typ: TypePassword, null: true,
		doc: "The password of the key store file (PKCS12), or of the encrypted private key in a PEM key store file."},
	{name: "ssl.key.password", typ: TypePassword, null: true,
		doc: "The password of the private key: for PKCS12 when it differs from the store's, for PEM when ssl.keystore.key is encrypted."},
	{name: "ssl.keystore.certificate.chain", typ: TypePassword, null: true,
		doc: "The certificate chain in PEM, given inline; with ssl.keystore.type PEM and ssl.keystore.key."},
	{name: "ssl.keystore.key", typ: TypePassword, null: true,
		doc: "The private key in PEM (PKCS#8, encrypted with ssl.key.password or not), given inline; with ssl.keystore.type PEM."},
	{name: "ssl.truststore.type", typ: TypeString, dflt: StoreTypeJKS,
		doc: "The format of the trust store: PKCS12 or PEM. Kafka's default, JKS, is refused at start when a trust store is given."},
	{name: "ssl.truststore.location", typ: TypeString, null: true,
		doc: "The trust store file: the certificates that sign client certificates."},
	{name: "ssl.truststore.password", typ: TypePassword, null: true,
		doc: "The password of the trust store file (PKCS12); not used for PEM."},
	{name: "ssl.truststore.certificates", typ: TypePassword, null: true,
		doc: "Trusted certificates in PEM, given inline; with ssl.truststore.type PEM."},
	{name: "ssl.client.auth", typ: TypeString, dflt: "none", check: oneOf("required", "requested", "none"),
		doc: "Whether clients of a TLS listener must (required) or may (requested) present a certificate signed by the trust store; its subject gives the principal."},
	{name: "ssl.enabled.protocols", typ: TypeList, dflt: "TLSv1.2,TLSv1.3", check: listOf(true, tlsProtocols...),
		doc: "The TLS versions a TLS listener accepts: TLSv1.2, TLSv1.3."},
	{name: "ssl.protocol", typ: TypeString, dflt: "TLSv1.3", check: oneOf("TLSv1.2", "TLSv1.3", "TLS"),
		doc: "The highest TLS version (TLSv1.3, or TLSv1.2 to stop at 1.2; TLS is the highest supported); ssl.enabled.protocols selects among those up to it."},
	{name: "ssl.cipher.suites", typ: TypeList, dflt: "",
		doc: "The TLS 1.2 cipher suites a TLS listener accepts, by their IANA names; TLS 1.3 suites cannot be chosen one by one: list all three or none, and listing none (with some TLS 1.2 ones) disables TLS 1.3. Not set: Go's defaults."},
	{name: "ssl.principal.mapping.rules", typ: TypeString, dflt: "DEFAULT",
		doc: "Rules mapping a client certificate's subject (RFC 2253) to the principal's name: RULE:pattern/replacement/[LU] entries and DEFAULT (the subject as is), first match wins."},
	{name: "ssl.endpoint.identification.algorithm", typ: TypeString, dflt: "https",
		doc: "Host name verification when the broker connects to others over TLS."},
	{name: "sasl.enabled.mechanisms", typ: TypeList, dflt: "GSSAPI",
		doc: "The SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. Kafka's default, GSSAPI, is refused at start on a SASL listener."},
	{name: "sasl.server.max.receive.size", typ: TypeInt, dflt: "524288",
		doc: "The largest request a client may send before it is authenticated; a larger one closes the connection."},
	{name: "connections.max.reauth.ms", typ: TypeLong, dflt: "0",
		doc: "When positive, the longest a SASL session lasts before the client must re-authenticate on its connection (KIP-368): the session lifetime sent in SaslAuthenticate v1+, after which a connection that has not re-authenticated is closed at its next request. Also per listener and mechanism, listener.name.<listener>.<mechanism>.connections.max.reauth.ms."},
	{name: "connection.failed.authentication.delay.ms", typ: TypeInt, dflt: "100", check: atLeast(0),
		doc: "How long a connection that failed authentication (SASL, or the TLS handshake) is held before it is closed, to slow down password guessing.",
		set: func(b *Broker, v value) { b.ConnectionFailedAuthenticationDelayMs = int32(v.i) }},
	{name: "ssl.keymanager.algorithm", typ: TypeString, dflt: "SunX509",
		doc: "The Java key manager algorithm."},
	{name: "ssl.trustmanager.algorithm", typ: TypeString, dflt: "PKIX",
		doc: "The Java trust manager algorithm."},
	{name: "sasl.mechanism.inter.broker.protocol", typ: TypeString, dflt: "GSSAPI",
		doc: "The SASL mechanism brokers use with each other."},
	{name: "principal.builder.class", typ: TypeClass, dflt: "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
		doc: "The Java class building principals; Gregor builds them as Kafka's default one does (the SASL user, or the mapped certificate subject), and refuses any other class."},
	{name: "sasl.server.callback.handler.class", typ: TypeClass, null: true,
		doc: "A Java class checking SASL credentials; refused when set (PLAIN users come from the JAAS config), except listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class naming Kafka's OAuthBearerValidatorCallbackHandler (JWT validation) or its unsecured validator."},
	{name: "ssl.engine.factory.class", typ: TypeClass, null: true,
		doc: "A Java class creating TLS engines; refused when set."},
	{name: "ssl.provider", typ: TypeString, null: true,
		doc: "A Java security provider for TLS; refused when set."},
	{name: "ssl.secure.random.implementation", typ: TypeString, null: true,
		doc: "A Java random number generator for TLS; refused when set (Go's crypto/rand is used)."},
}, oauthBearerKeys...)

// refusedSecurityKeys are security properties that would change who is
// let in if honoured; Gregor cannot honour them, so setting one (plainly
// or per listener) stops start-up rather than being silently ignored.
var refusedSecurityKeys = map[string]string{
	"principal.builder.class":            "principals are built as Kafka's DefaultKafkaPrincipalBuilder does; no other class can run",
	"sasl.server.callback.handler.class": "SASL credentials are checked against the JAAS config's users, not by a Java class",
	"ssl.engine.factory.class":           "TLS is Go's crypto/tls, not a Java engine factory",
	"ssl.provider":                       "TLS is Go's crypto/tls, not a Java security provider",
	"ssl.secure.random.implementation":   "TLS takes its randomness from Go's crypto/rand",
}

// securityLimits say, for docs/configuration.md, which values of an
// honoured security property Gregor serves; the others stop start-up.
var securityLimits = map[string]string{
	"ssl.keystore.type":       "PKCS12 and PEM; JKS is refused at start",
	"ssl.truststore.type":     "PKCS12 and PEM; JKS is refused at start",
	"sasl.enabled.mechanisms": "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (SCRAM users from the metadata log, written by AlterUserScramCredentials), OAUTHBEARER (unsecured JWS, or JWTs checked against a JWKS); GSSAPI is refused at start",
	"ssl.cipher.suites":       "TLS 1.2 suites by name; the TLS 1.3 suites all or none",
	"ssl.protocol":            "TLSv1.2, TLSv1.3 or TLS",
}

// ListenerSecurity is the security of one client listener: its protocol
// and, resolved with the listener.name.<name>. prefix, the SSL and SASL
// settings that apply to it.
type ListenerSecurity struct {
	Listener string // upper-cased listener name
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL

	SSL SSLSettings // for SSL and SASL_SSL

	// SASLMechanisms are the mechanisms enabled, in the order given.
	SASLMechanisms []string
	// JAAS holds, per enabled mechanism, the text of
	// listener.name.<name>.<mechanism>.sasl.jaas.config ("" when not set).
	JAAS map[string]string
	// SASLMaxReceiveSize is sasl.server.max.receive.size.
	SASLMaxReceiveSize int32
	// ReauthMs is connections.max.reauth.ms per enabled mechanism, from
	// listener.name.<l>.<mechanism>.connections.max.reauth.ms, else the
	// listener's or the broker's (security_oauth.go); 0: no limit.
	ReauthMs map[string]int64
	// OAuthBearer is how OAUTHBEARER tokens are validated, when enabled.
	OAuthBearer OAuthBearerSettings
}

// TLS reports whether the listener's connections are TLS.
func (l ListenerSecurity) TLS() bool { return l.Protocol == "SSL" || l.Protocol == "SASL_SSL" }

// SASL reports whether the listener's clients authenticate with SASL.
func (l ListenerSecurity) SASL() bool {
	return l.Protocol == "SASL_PLAINTEXT" || l.Protocol == "SASL_SSL"
}

// SSLSettings are the ssl.* properties of one listener. Each field keeps
// the name of the property that gave it in Source, for error messages.
type SSLSettings struct {
	KeystoreType             string
	KeystoreLocation         string
	KeystorePassword         string
	KeyPassword              string
	KeystoreCertificateChain string
	KeystoreKey              string
	TruststoreType           string
	TruststoreLocation       string
	TruststorePassword       string
	TruststoreCertificates   string
	ClientAuth               string // none, requested, required
	Protocol                 string // ssl.protocol
	EnabledProtocols         []string
	CipherSuites             []string // nil: the defaults
	PrincipalMappingRules    string
	// Source maps a key (ssl.keystore.location...) to the property name
	// it was read from: the listener-prefixed one or the plain one.
	Source map[string]string
}

// ListenerSecurity returns the security of the named client listener.
func (b *Broker) ListenerSecurity(name string) ListenerSecurity {
	if ls, ok := b.listenerSecurity[name]; ok {
		return ls
	}
	return ListenerSecurity{Listener: name, Protocol: b.ListenerSecurityProtocolMap[name]}
}

// SecurityProtocolID is Kafka's id of a security protocol, as the broker
// registration record carries it.
func SecurityProtocolID(proto string) int16 {
	switch proto {
	case "SSL":
		return 1
	case "SASL_PLAINTEXT":
		return 2
	case "SASL_SSL":
		return 3
	}
	return 0
}

// listenerPrefix is Kafka's ListenerName.configPrefix.
func listenerPrefix(listener string) string {
	return "listener.name." + strings.ToLower(listener) + "."
}

// isListenerSecurityKey reports whether name is a listener-prefixed SSL
// or SASL property of one of the listeners in spm.
func isListenerSecurityKey(name string, spm map[string]string) bool {
	if !strings.HasPrefix(name, "listener.name.") {
		return false
	}
	for l := range spm {
		rest, ok := strings.CutPrefix(name, listenerPrefix(l))
		if !ok {
			continue
		}
		if isSecurityKey(rest) || isMechanismKey(rest) {
			return true
		}
	}
	return false
}

func isSecurityKey(name string) bool {
	return slices.ContainsFunc(securityKeys, func(k brokerKey) bool { return k.name == name })
}

// isMechanismKey reports whether name is <mechanism>.sasl.jaas.config or
// <mechanism>.sasl.server.callback.handler.class.
func isMechanismKey(name string) bool {
	for _, m := range []string{"plain", "scram-sha-256", "scram-sha-512", "gssapi", "oauthbearer"} {
		if rest, ok := strings.CutPrefix(name, m+"."); ok &&
			(rest == "sasl.jaas.config" || rest == "sasl.server.callback.handler.class" || isMechanismSecurityKey(m, rest)) {
			return true
		}
	}
	return false
}

// deriveSecurity resolves and checks the SSL and SASL settings of every
// listener this node serves, and refuses the properties Gregor cannot honour.
func (b *Broker) deriveSecurity(props map[string]string) error {
	// A refused key is refused wherever it is set, plainly or prefixed.
	for name := range props {
		key := name
		if isListenerSecurityKey(name, b.ListenerSecurityProtocolMap) {
			_, key, _ = strings.Cut(strings.TrimPrefix(name, "listener.name."), ".")
			if mech, k, ok := strings.Cut(key, "."); ok && strings.HasSuffix(key, ".sasl.server.callback.handler.class") {
				key = k
				// OAUTHBEARER's validator class is read, and checked by
				// name, in resolveOAuthBearer.
				if mech == "oauthbearer" {
					continue
				}
			}
		}
		// Setting a refused key to Kafka's default asks for nothing else.
		if why, ok := refusedSecurityKeys[key]; ok && javaTrim(props[name]) != "" && javaTrim(props[name]) != brokerKeyIndex[key].dflt {
			return invalid(name, props[name], "not supported: %s", why)
		}
	}
	b.listenerSecurity = map[string]ListenerSecurity{}
	for _, l := range b.Listeners {
		ls, err := b.resolveListenerSecurity(l.Name, props)
		if err != nil {
			return err
		}
		b.listenerSecurity[l.Name] = ls
	}
	return nil
}

// resolved is one security property's value for a listener, and the name
// it came from.
type resolved struct {
	v    value
	name string
	raw  string
	set  bool
}

// lookup returns key's value for listener: the prefixed property, else
// the plain one, else the default, checked as the key's type and
// validator require.
func lookup(key, listener string, props map[string]string) (resolved, error) {
	k := brokerKeyIndex[key]
	for _, name := range []string{listenerPrefix(listener) + key, key} {
		raw, ok := props[name]
		if !ok {
			continue
		}
		v, err := parseChecked(name, k.typ, k.check, raw)
		if err != nil {
			return resolved{}, err
		}
		return resolved{v: v, name: name, raw: raw, set: true}, nil
	}
	v, err := k.resolve(nil)
	return resolved{v: v, name: key, raw: k.dflt}, err
}

func (b *Broker) resolveListenerSecurity(listener string, props map[string]string) (ListenerSecurity, error) {
	ls := ListenerSecurity{Listener: listener, Protocol: b.ListenerSecurityProtocolMap[listener]}
	// Every prefixed property of this listener is checked, even those its
	// protocol does not use, so a typo in one fails now, not when the
	// protocol changes.
	vals := map[string]resolved{}
	for _, k := range securityKeys {
		r, err := lookup(k.name, listener, props)
		if err != nil {
			return ls, err
		}
		vals[k.name] = r
	}
	if ls.TLS() {
		ssl, err := resolveSSL(listener, vals, true)
		if err != nil {
			return ls, err
		}
		ls.SSL = ssl
	}
	if ls.SASL() {
		if err := resolveSASL(&ls, vals, props); err != nil {
			return ls, err
		}
	}
	return ls, nil
}

// resolveSSL reads a listener's ssl.* settings. A listener this node
// serves needs a key store (needKeystore); one it only connects to uses
// it, when given, for its client certificate.
func resolveSSL(listener string, vals map[string]resolved, needKeystore bool) (SSLSettings, error) {
	str := func(k string) string { return vals[k].v.s }
	s := SSLSettings{
		KeystoreType:             strings.ToUpper(str("ssl.keystore.type")),
		KeystoreLocation:         str("ssl.keystore.location"),
		KeystorePassword:         str("ssl.keystore.password"),
		KeyPassword:              str("ssl.key.password"),
		KeystoreCertificateChain: str("ssl.keystore.certificate.chain"),
		KeystoreKey:              str("ssl.keystore.key"),
		TruststoreType:           strings.ToUpper(str("ssl.truststore.type")),
		TruststoreLocation:       str("ssl.truststore.location"),
		TruststorePassword:       str("ssl.truststore.password"),
		TruststoreCertificates:   str("ssl.truststore.certificates"),
		ClientAuth:               str("ssl.client.auth"),
		Protocol:                 str("ssl.protocol"),
		EnabledProtocols:         vals["ssl.enabled.protocols"].v.list,
		PrincipalMappingRules:    str("ssl.principal.mapping.rules"),
		Source:                   map[string]string{},
	}
	if v := vals["ssl.cipher.suites"].v; !v.null && len(v.list) > 0 {
		s.CipherSuites = v.list
	}
	for k, r := range vals {
		if strings.HasPrefix(k, "ssl.") {
			s.Source[k] = r.name
		}
	}
	inline := vals["ssl.keystore.certificate.chain"].set || vals["ssl.keystore.key"].set
	for _, c := range []struct {
		typeKey, typ string
		given        bool
	}{
		{"ssl.keystore.type", s.KeystoreType, s.KeystoreLocation != "" || inline},
		{"ssl.truststore.type", s.TruststoreType, s.TruststoreLocation != "" || s.TruststoreCertificates != ""},
	} {
		switch {
		case c.typ == StoreTypeJKS && c.given:
			return s, invalid(vals[c.typeKey].name, vals[c.typeKey].raw,
				"listener %s: JKS stores are not supported (no maintained Go library reads them); convert it with keytool -importkeystore -deststoretype PKCS12 and set %s=PKCS12, or use PEM",
				listener, c.typeKey)
		case c.typ != StoreTypeJKS && c.typ != StoreTypePKCS12 && c.typ != StoreTypePEM:
			return s, invalid(vals[c.typeKey].name, vals[c.typeKey].raw, "listener %s: the store type must be PKCS12 or PEM", listener)
		}
	}
	if needKeystore && s.KeystoreLocation == "" && !inline {
		return s, invalid(vals["ssl.keystore.location"].name, "null",
			"listener %s uses TLS and needs a key store: set ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key (ssl.keystore.type=PEM)", listener)
	}
	if inline {
		switch {
		case s.KeystoreLocation != "":
			return s, invalid(vals["ssl.keystore.location"].name, s.KeystoreLocation,
				"listener %s: give the key store either as a file or inline (ssl.keystore.certificate.chain and ssl.keystore.key), not both", listener)
		case s.KeystoreType != StoreTypePEM:
			return s, invalid(vals["ssl.keystore.type"].name, s.KeystoreType,
				"listener %s: an inline key store (ssl.keystore.certificate.chain, ssl.keystore.key) needs ssl.keystore.type=PEM", listener)
		case s.KeystoreCertificateChain == "" || s.KeystoreKey == "":
			return s, invalid(vals["ssl.keystore.key"].name, "[hidden]",
				"listener %s: an inline key store needs both ssl.keystore.certificate.chain and ssl.keystore.key", listener)
		}
	}
	if s.TruststoreCertificates != "" {
		switch {
		case s.TruststoreLocation != "":
			return s, invalid(vals["ssl.truststore.location"].name, s.TruststoreLocation,
				"listener %s: give the trust store either as a file or inline (ssl.truststore.certificates), not both", listener)
		case s.TruststoreType != StoreTypePEM:
			return s, invalid(vals["ssl.truststore.type"].name, s.TruststoreType,
				"listener %s: inline trusted certificates (ssl.truststore.certificates) need ssl.truststore.type=PEM", listener)
		}
	}
	if needKeystore && s.ClientAuth != "none" && s.TruststoreLocation == "" && s.TruststoreCertificates == "" {
		return s, invalid(vals["ssl.client.auth"].name, s.ClientAuth,
			"listener %s: client certificates can only be checked against a trust store: set ssl.truststore.location or ssl.truststore.certificates", listener)
	}
	if s.Protocol == "TLSv1.2" && !slices.Contains(s.EnabledProtocols, "TLSv1.2") {
		return s, invalid(vals["ssl.protocol"].name, s.Protocol,
			"listener %s: ssl.protocol TLSv1.2 allows no version of ssl.enabled.protocols (%s)", listener, strings.Join(s.EnabledProtocols, ","))
	}
	return s, nil
}

func resolveSASL(ls *ListenerSecurity, vals map[string]resolved, props map[string]string) error {
	mech := vals["sasl.enabled.mechanisms"]
	if len(mech.v.list) == 0 {
		return invalid(mech.name, mech.raw, "listener %s uses %s and needs at least one mechanism", ls.Listener, ls.Protocol)
	}
	for i, m := range mech.v.list {
		if !slices.Contains(ServedSASLMechanisms, m) {
			return invalid(mech.name, mech.raw, "listener %s: SASL mechanism %s is not supported; gregor serves %s",
				ls.Listener, m, strings.Join(ServedSASLMechanisms, ", "))
		}
		if slices.Contains(mech.v.list[i+1:], m) {
			return invalid(mech.name, mech.raw, "listener %s: mechanism %s is listed twice", ls.Listener, m)
		}
	}
	ls.SASLMechanisms = mech.v.list
	ls.JAAS = map[string]string{}
	for _, m := range ls.SASLMechanisms {
		name := listenerPrefix(ls.Listener) + strings.ToLower(m) + ".sasl.jaas.config"
		ls.JAAS[m] = props[name]
		if m == MechanismPlain && javaTrim(props[name]) == "" {
			return invalid(name, "null", "listener %s enables PLAIN, whose users are read from this JAAS config (user_<name>=\"<password>\" options of org.apache.kafka.common.security.plain.PlainLoginModule)", ls.Listener)
		}
	}
	size := vals["sasl.server.max.receive.size"]
	if size.v.i < 1 {
		return invalid(size.name, size.raw, "Value must be at least 1")
	}
	ls.SASLMaxReceiveSize = int32(size.v.i)
	return resolveSASLMechanisms(ls, vals, props)
}
