package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPeerSecurity: the inter-broker and controller listeners may be
// secured; the client side of each is resolved from the listener's own
// settings, and what Gregor cannot do as a client is refused naming the
// property.
func TestPeerSecurity(t *testing.T) {
	const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="b-secret" user_broker="b-secret";`
	base := func(extra map[string]string) map[string]string {
		p := map[string]string{
			"listeners":                                       "CLIENT://:9092,INTERNAL://:9094,CONTROLLER://:9093",
			"advertised.listeners":                            "CLIENT://h:9092,INTERNAL://h:9094",
			"listener.security.protocol.map":                  "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
			"inter.broker.listener.name":                      "INTERNAL",
			"sasl.enabled.mechanisms":                         "PLAIN,SCRAM-SHA-512",
			"listener.name.internal.plain.sasl.jaas.config":   plainJAAS,
			"listener.name.controller.plain.sasl.jaas.config": plainJAAS,
			"sasl.mechanism.inter.broker.protocol":            "PLAIN",
			"sasl.mechanism.controller.protocol":              "PLAIN",
		}
		for k, v := range extra {
			if v == "" {
				delete(p, k)
			} else {
				p[k] = v
			}
		}
		return p
	}
	b, _, err := Parse(base(nil))
	if err != nil {
		t.Fatal(err)
	}
	ib, cs := b.InterBrokerSecurity(), b.ControllerSecurity()
	if ib.Listener != "INTERNAL" || ib.Protocol != "SASL_PLAINTEXT" || ib.Mechanism != "PLAIN" || ib.JAAS != plainJAAS ||
		ib.JAASKey != "listener.name.internal.plain.sasl.jaas.config" {
		t.Errorf("inter-broker = %+v", ib)
	}
	if cs.Listener != "CONTROLLER" || cs.Mechanism != "PLAIN" || cs.MechanismKey != "sasl.mechanism.controller.protocol" {
		t.Errorf("controller = %+v", cs)
	}

	// A broker-only node connecting to an SSL controller listener it does
	// not serve needs no key store; its trust store is read.
	b, _, err = Parse(map[string]string{
		"process.roles":                  "broker",
		"node.id":                        "2",
		"controller.quorum.voters":       "1@c:9093",
		"listeners":                      "PLAINTEXT://:9092",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
		"listener.name.controller.ssl.truststore.type":                   "PEM",
		"listener.name.controller.ssl.truststore.location":               "/ca.pem",
		"listener.name.controller.ssl.endpoint.identification.algorithm": "",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cs := b.ControllerSecurity(); cs.Protocol != "SSL" || cs.SSL.TruststoreLocation != "/ca.pem" || cs.VerifyHostname {
		t.Errorf("broker-only controller security = %+v", cs)
	}
	if ib := b.InterBrokerSecurity(); ib.Protocol != "PLAINTEXT" {
		t.Errorf("inter-broker = %+v", ib)
	}

	refused := []struct {
		extra map[string]string
		key   string
		says  string
	}{
		{map[string]string{"sasl.mechanism.inter.broker.protocol": ""}, "sasl.mechanism.inter.broker.protocol", "GSSAPI"},
		{map[string]string{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, "sasl.mechanism.inter.broker.protocol", "must be included in sasl.enabled.mechanisms"},
		{map[string]string{"sasl.mechanism.controller.protocol": "SCRAM-SHA-512"}, "sasl.mechanism.controller.protocol", "use PLAIN on the controller listener"},
		{map[string]string{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}, "listener.name.internal.scram-sha-512.sasl.jaas.config", "username and password"},
		{map[string]string{
			"listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
			"ssl.keystore.type":              "PEM", "ssl.keystore.location": "/k.pem",
			"listener.name.internal.ssl.endpoint.identification.algorithm": "ldap",
		}, "listener.name.internal.ssl.endpoint.identification.algorithm", "https"},
		{map[string]string{
			"listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
		}, "ssl.keystore.location", "needs a key store"},
		{map[string]string{
			"listeners":                      "CLIENT://:9092,INTERNAL://:9094,CONTROLLER://:9093,CTRL2://:9095",
			"controller.listener.names":      "CONTROLLER,CTRL2",
			"listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT,CTRL2:PLAINTEXT",
		}, "controller.listener.names", "differ in security protocol"},
	}
	for _, tt := range refused {
		_, _, err := Parse(base(tt.extra))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Name != tt.key || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Parse(%v) = %v, want %s refused saying %q", tt.extra, err, tt.key, tt.says)
		}
	}

	// A protocol in the map that no listener uses is no reason to refuse:
	// Kafka's default map names all four.
	b, _, err = Parse(map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SPARE:SASL_SSL"})
	if err != nil {
		t.Fatalf("an unused SASL_SSL entry: %v", err)
	}
	if b.ListenerSecurityProtocolMap["SPARE"] != "SASL_SSL" {
		t.Fatalf("map = %v", b.ListenerSecurityProtocolMap)
	}
}

// secureProps is a broker with a PLAINTEXT inter-broker listener and the
// client listeners given, all mapped by name (SSL:SSL...).
func secureProps(extra map[string]string) map[string]string {
	p := map[string]string{
		"listeners":                                           "PLAINTEXT://:9092,SSL://:9094,SASL_SSL://:9095,SASL_PLAINTEXT://:9096,CONTROLLER://:9093",
		"advertised.listeners":                                "PLAINTEXT://h:9092,SSL://h:9094,SASL_SSL://h:9095,SASL_PLAINTEXT://h:9096",
		"listener.security.protocol.map":                      "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":                                   "PKCS12",
		"ssl.keystore.location":                               "/etc/k.p12",
		"sasl.enabled.mechanisms":                             "PLAIN",
		"listener.name.sasl_ssl.plain.sasl.jaas.config":       `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`,
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`,
	}
	for k, v := range extra {
		if v == "" {
			delete(p, k)
		} else {
			p[k] = v
		}
	}
	return p
}

func TestListenerSecurityPrefixes(t *testing.T) {
	b, unknown, err := Parse(secureProps(map[string]string{
		"listener.name.ssl.ssl.keystore.location":             "/etc/ssl-only.pem",
		"listener.name.ssl.ssl.keystore.type":                 "PEM",
		"listener.name.ssl.ssl.client.auth":                   "required",
		"listener.name.ssl.ssl.truststore.location":           "/etc/ca.pem",
		"listener.name.ssl.ssl.truststore.type":               "PEM",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":      "SCRAM-SHA-512,PLAIN",
		"listener.name.sasl_ssl.sasl.server.max.receive.size": "1024",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 0 {
		t.Fatalf("unknown = %v", unknown)
	}
	ssl := b.ListenerSecurity("SSL")
	if !ssl.TLS() || ssl.SASL() || ssl.SSL.KeystoreLocation != "/etc/ssl-only.pem" || ssl.SSL.KeystoreType != "PEM" ||
		ssl.SSL.ClientAuth != "required" || ssl.SSL.Source["ssl.keystore.location"] != "listener.name.ssl.ssl.keystore.location" {
		t.Fatalf("SSL = %+v", ssl)
	}
	ss := b.ListenerSecurity("SASL_SSL")
	if !ss.TLS() || !ss.SASL() || ss.SSL.KeystoreLocation != "/etc/k.p12" || ss.SSL.ClientAuth != "none" ||
		!slices.Equal(ss.SASLMechanisms, []string{"SCRAM-SHA-512", "PLAIN"}) || ss.SASLMaxReceiveSize != 1024 ||
		!strings.Contains(ss.JAAS["PLAIN"], "user_a") || ss.SSL.Source["ssl.keystore.location"] != "ssl.keystore.location" {
		t.Fatalf("SASL_SSL = %+v", ss)
	}
	sp := b.ListenerSecurity("SASL_PLAINTEXT")
	if sp.TLS() || !slices.Equal(sp.SASLMechanisms, []string{"PLAIN"}) || sp.SASLMaxReceiveSize != 524288 {
		t.Fatalf("SASL_PLAINTEXT = %+v", sp)
	}
	if p := b.ListenerSecurity("PLAINTEXT"); p.TLS() || p.SASL() {
		t.Fatalf("PLAINTEXT = %+v", p)
	}
}

func TestListenerSecurityRefusals(t *testing.T) {
	tests := []struct {
		extra    map[string]string
		key, msg string
	}{
		{map[string]string{"ssl.keystore.type": ""}, "ssl.keystore.type", "JKS stores are not supported"},
		{map[string]string{"listener.name.ssl.ssl.keystore.type": "JKS"}, "listener.name.ssl.ssl.keystore.type", "keytool"},
		{map[string]string{"ssl.keystore.location": ""}, "ssl.keystore.location", "needs a key store"},
		{map[string]string{"ssl.keystore.key": "x"}, "ssl.keystore.location", "not both"},
		{map[string]string{"ssl.client.auth": "required"}, "ssl.client.auth", "trust store"},
		{map[string]string{"ssl.client.auth": "sometimes"}, "ssl.client.auth", "String must be one of"},
		{map[string]string{"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols", "String must be one of"},
		{map[string]string{"sasl.enabled.mechanisms": ""}, "sasl.enabled.mechanisms", "GSSAPI is not supported"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "GSSAPI"}, "listener.name.sasl_ssl.sasl.enabled.mechanisms", "GSSAPI is not supported"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER"}, "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config", "OAuthBearerLoginModule"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": "com.example.MyValidator"}, "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class", "no other class can run"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": OAuthBearerJWTValidator}, "sasl.oauthbearer.jwks.endpoint.url", "requires \"sasl.oauthbearer.jwks.endpoint.url\" to be configured"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"}, "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class", "no other class can run"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": oauthJAAS,
			"sasl.oauthbearer.jwt.validator.class": "com.example.V"}, "sasl.oauthbearer.jwt.validator.class", "no other class can run"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": OAuthBearerJWTValidator,
			"sasl.oauthbearer.jwks.endpoint.url":                                    "ftp://example/jwks"}, "sasl.oauthbearer.jwks.endpoint.url", "invalid protocol (ftp)"},
		{map[string]string{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER", "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": oauthJAAS,
			"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": OAuthBearerJWTValidator,
			"sasl.oauthbearer.jwks.endpoint.url":                                    "file:///etc/jwks.json", "sasl.oauthbearer.expected.audience": "kafka"}, "sasl.oauthbearer.expected.issuer", `set "sasl.oauthbearer.allow.unverified.issuer" to true`},
		{map[string]string{"listener.name.sasl_ssl.plain.connections.max.reauth.ms": "soon"}, "listener.name.sasl_ssl.plain.connections.max.reauth.ms", "soon"},
		{map[string]string{"listener.name.sasl_ssl.plain.sasl.jaas.config": ""}, "listener.name.sasl_ssl.plain.sasl.jaas.config", "PlainLoginModule"},
		{map[string]string{"principal.builder.class": "com.example.Builder"}, "principal.builder.class", "not supported"},
		{map[string]string{"listener.name.ssl.ssl.provider": "SunJSSE"}, "listener.name.ssl.ssl.provider", "not supported"},
		{map[string]string{"listener.name.sasl_ssl.plain.sasl.server.callback.handler.class": "com.example.H"}, "listener.name.sasl_ssl.plain.sasl.server.callback.handler.class", "not supported"},
	}
	for _, tt := range tests {
		_, _, err := Parse(secureProps(tt.extra))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Name != tt.key || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Parse(+%v) = %v, want %s refused with %q", tt.extra, err, tt.key, tt.msg)
		}
	}
}

const oauthJAAS = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="produce";`

// TestOAuthBearerSettings: the OAUTHBEARER validator and its KIP-768
// settings resolve with Kafka's three prefixes (listener and mechanism,
// listener, none), and connections.max.reauth.ms per mechanism.
func TestOAuthBearerSettings(t *testing.T) {
	b, _, err := Parse(secureProps(map[string]string{
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":                        "OAUTHBEARER,PLAIN",
		"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":                   oauthJAAS,
		"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": OAuthBearerJWTValidator,
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file:///etc/jwks.json",
		"listener.name.sasl_ssl.sasl.oauthbearer.expected.audience":             "kafka,other",
		"sasl.oauthbearer.expected.issuer":                                      "https://issuer",
		"sasl.oauthbearer.sub.claim.name":                                       "client_id",
		"connections.max.reauth.ms":                                             "60000",
		"listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms":          "5000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	ls := b.ListenerSecurity("SASL_SSL")
	o := ls.OAuthBearer
	if o.Handler != OAuthBearerJWTValidator || o.JWKSURL != "file:///etc/jwks.json" || !slices.Equal(o.ExpectedAudience, []string{"kafka", "other"}) ||
		o.ExpectedIssuer != "https://issuer" || o.SubClaimName != "client_id" || o.ScopeClaimName != "scope" || o.ClockSkewSeconds != 30 ||
		o.Source["sasl.oauthbearer.jwks.endpoint.url"] != "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url" {
		t.Fatalf("OAuthBearer = %+v", o)
	}
	if ls.ReauthMs["OAUTHBEARER"] != 5000 || ls.ReauthMs["PLAIN"] != 60000 {
		t.Fatalf("ReauthMs = %v", ls.ReauthMs)
	}
	if sp := b.ListenerSecurity("SASL_PLAINTEXT"); sp.ReauthMs["PLAIN"] != 60000 || sp.OAuthBearer.Handler != "" {
		t.Fatalf("SASL_PLAINTEXT = %+v", sp)
	}
}

func TestRefusedKeyAtDefault(t *testing.T) {
	_, _, err := Parse(secureProps(map[string]string{
		"principal.builder.class": "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
	}))
	if err != nil {
		t.Fatalf("Kafka's default principal builder refused: %v", err)
	}
}

func TestSensitiveSecurityKeysHidden(t *testing.T) {
	b, _, err := Parse(secureProps(map[string]string{"ssl.keystore.password": "hunter2"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range b.DescribeBroker() {
		if e.Name != "ssl.keystore.password" {
			continue
		}
		if !e.Sensitive || !e.IsNull || e.Value != "" || e.Source != SourceStaticBroker {
			t.Fatalf("entry = %+v", e)
		}
		for _, s := range e.Synonyms {
			if s.Value != "" {
				t.Fatalf("synonym shows the password: %+v", s)
			}
		}
		return
	}
	t.Fatal("ssl.keystore.password not described")
}

func TestSecurityTablesNameKeys(t *testing.T) {
	for _, m := range []map[string]string{securityLimits, refusedSecurityKeys} {
		for name := range m {
			if _, ok := brokerKeyIndex[name]; !ok {
				t.Errorf("%s is not a broker key", name)
			}
		}
	}
}
