package config

import (
	"net/url"
	"slices"
	"strings"
)

// OAUTHBEARER (RFC 7628, KIP-255) and its JWT validation settings
// (KIP-768), and re-authentication per mechanism (KIP-368).

// MechanismOAuthBearer is SASL/OAUTHBEARER.
const MechanismOAuthBearer = "OAUTHBEARER"

// The server callback handler classes of OAUTHBEARER that Gregor serves,
// by the names Kafka users set in
// listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class.
const (
	// OAuthBearerUnsecuredValidator is Kafka's default: unsecured JWS
	// ("alg":"none"), for development, configured by the
	// unsecuredValidator* options of the listener's JAAS config.
	OAuthBearerUnsecuredValidator = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
	// OAuthBearerJWTValidator validates signed JWTs against the keys of
	// sasl.oauthbearer.jwks.endpoint.url (KIP-768).
	OAuthBearerJWTValidator = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	// oauthBearerJWTValidatorOld is its name before Kafka 3.4, kept by
	// Kafka as a deprecated subclass.
	oauthBearerJWTValidatorOld = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
)

// oauthBearerKeys are Kafka's broker-side OAUTHBEARER properties. Each
// may be given as listener.name.<l>.oauthbearer.<key>, as
// listener.name.<l>.<key> or plainly, the first found winning, as
// Kafka's ConfigurationUtils reads them.
var oauthBearerKeys = []brokerKey{
	{name: "sasl.oauthbearer.jwks.endpoint.url", typ: TypeString, null: true,
		doc: "Where OAuthBearerValidatorCallbackHandler reads the JSON Web Key Set that signs tokens: a file: URL (read at start), or an http(s) URL (fetched at start and every sasl.oauthbearer.jwks.endpoint.refresh.ms, and again when a token names a key id it does not hold)."},
	{name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", typ: TypeLong, dflt: "3600000", check: atLeast(0),
		doc: "How often an http(s) JWKS is fetched again."},
	{name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", typ: TypeLong, dflt: "100", check: atLeast(0),
		doc: "The first wait before fetching an http(s) JWKS again after a failure."},
	{name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", typ: TypeLong, dflt: "10000", check: atLeast(0),
		doc: "The longest wait between attempts to fetch an http(s) JWKS."},
	{name: "sasl.oauthbearer.expected.audience", typ: TypeList, null: true,
		doc: "Audiences of which a JWT's aud claim must name one. Not set: a JWT with an aud claim is refused, as Kafka's jose4j consumer does."},
	{name: "sasl.oauthbearer.expected.issuer", typ: TypeString, null: true,
		doc: "The issuer a JWT's iss claim must be. Not set: any."},
	{name: "sasl.oauthbearer.scope.claim.name", typ: TypeString, dflt: "scope",
		doc: "The claim holding a JWT's scopes."},
	{name: "sasl.oauthbearer.sub.claim.name", typ: TypeString, dflt: "sub",
		doc: "The claim holding a JWT's subject, the principal's name (User:<subject>)."},
	{name: "sasl.oauthbearer.clock.skew.seconds", typ: TypeInt, dflt: "30",
		doc: "The clock difference allowed with the token's issuer when checking a JWT's exp and nbf."},
}

// OAuthBearerSettings say how a listener validates OAUTHBEARER tokens.
type OAuthBearerSettings struct {
	// Handler is the callback handler class: OAuthBearerUnsecuredValidator
	// (the default) or OAuthBearerJWTValidator.
	Handler string
	// JAAS is the listener's OAUTHBEARER JAAS config, whose
	// unsecuredValidator* options the unsecured validator reads.
	JAAS string

	// The KIP-768 settings, for OAuthBearerJWTValidator.
	JWKSURL               string
	JWKSRefreshMs         int64
	JWKSRetryBackoffMs    int64
	JWKSRetryBackoffMaxMs int64
	ExpectedAudience      []string
	ExpectedIssuer        string
	ScopeClaimName        string
	SubClaimName          string
	ClockSkewSeconds      int32
	// Source maps each key to the property name it was read from.
	Source map[string]string
}

// isMechanismSecurityKey reports whether rest, after
// listener.name.<l>.<mechanism>., is a property Kafka reads with a
// mechanism prefix: connections.max.reauth.ms for any mechanism, the
// OAUTHBEARER settings for oauthbearer.
func isMechanismSecurityKey(mechanism, rest string) bool {
	if rest == "connections.max.reauth.ms" {
		return true
	}
	return mechanism == "oauthbearer" && slices.ContainsFunc(oauthBearerKeys, func(k brokerKey) bool { return k.name == rest })
}

// resolveSASLMechanisms reads what each enabled mechanism of a SASL
// listener needs beyond its JAAS config: its re-authentication limit and,
// for OAUTHBEARER, its validator.
func resolveSASLMechanisms(ls *ListenerSecurity, vals map[string]resolved, props map[string]string) error {
	ls.ReauthMs = map[string]int64{}
	for _, m := range ls.SASLMechanisms {
		r, err := lookupMechanism("connections.max.reauth.ms", ls.Listener, m, vals, props)
		if err != nil {
			return err
		}
		ls.ReauthMs[m] = r.v.i
		if m == MechanismOAuthBearer {
			o, err := resolveOAuthBearer(ls, vals, props)
			if err != nil {
				return err
			}
			ls.OAuthBearer = o
		}
	}
	return nil
}

// lookupMechanism is lookup with Kafka's mechanism prefix first:
// listener.name.<l>.<mechanism in lower case>.<key>.
func lookupMechanism(key, listener, mechanism string, vals map[string]resolved, props map[string]string) (resolved, error) {
	name := listenerPrefix(listener) + strings.ToLower(mechanism) + "." + key
	if raw, ok := props[name]; ok {
		k := brokerKeyIndex[key]
		v, err := parseChecked(name, k.typ, k.check, raw)
		if err != nil {
			return resolved{}, err
		}
		return resolved{v: v, name: name, raw: raw, set: true}, nil
	}
	return vals[key], nil
}

// oauthBearerLoginModule is the login module of an OAUTHBEARER JAAS config.
const oauthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

func resolveOAuthBearer(ls *ListenerSecurity, vals map[string]resolved, props map[string]string) (OAuthBearerSettings, error) {
	prefix := listenerPrefix(ls.Listener) + "oauthbearer."
	o := OAuthBearerSettings{Source: map[string]string{}}
	jaasName := prefix + "sasl.jaas.config"
	o.JAAS = props[jaasName]
	if javaTrim(o.JAAS) == "" {
		return o, invalid(jaasName, "null", "listener %s enables OAUTHBEARER, which needs a JAAS config naming %s (its unsecuredValidator* options configure the default validator), as Kafka requires of a broker", ls.Listener, oauthBearerLoginModule)
	}
	handlerName := prefix + "sasl.server.callback.handler.class"
	switch h := javaTrim(props[handlerName]); h {
	case "", OAuthBearerUnsecuredValidator:
		o.Handler = OAuthBearerUnsecuredValidator
	case OAuthBearerJWTValidator, oauthBearerJWTValidatorOld:
		o.Handler = OAuthBearerJWTValidator
	default:
		return o, invalid(handlerName, h, "listener %s: OAUTHBEARER tokens are validated by %s (unsecured JWS, the default) or %s (JWTs signed by a key of sasl.oauthbearer.jwks.endpoint.url); no other class can run",
			ls.Listener, OAuthBearerUnsecuredValidator, OAuthBearerJWTValidator)
	}
	get := func(key string) (resolved, error) {
		r, err := lookupMechanism(key, ls.Listener, MechanismOAuthBearer, vals, props)
		o.Source[key] = r.name
		return r, err
	}
	for _, k := range oauthBearerKeys {
		r, err := get(k.name)
		if err != nil {
			return o, err
		}
		switch k.name {
		case "sasl.oauthbearer.jwks.endpoint.url":
			o.JWKSURL = r.v.s
		case "sasl.oauthbearer.jwks.endpoint.refresh.ms":
			o.JWKSRefreshMs = r.v.i
		case "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":
			o.JWKSRetryBackoffMs = r.v.i
		case "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms":
			o.JWKSRetryBackoffMaxMs = r.v.i
		case "sasl.oauthbearer.expected.audience":
			o.ExpectedAudience = r.v.list
		case "sasl.oauthbearer.expected.issuer":
			o.ExpectedIssuer = r.v.s
		case "sasl.oauthbearer.scope.claim.name":
			o.ScopeClaimName = r.v.s
		case "sasl.oauthbearer.sub.claim.name":
			o.SubClaimName = r.v.s
		case "sasl.oauthbearer.clock.skew.seconds":
			o.ClockSkewSeconds = int32(r.v.i)
		}
	}
	if o.Handler != OAuthBearerJWTValidator {
		return o, nil
	}
	// As Kafka's ConfigurationUtils: the claim names must not be blank,
	// and the JWKS URL is required and must be a URL.
	for _, c := range []struct{ key, v string }{
		{"sasl.oauthbearer.scope.claim.name", o.ScopeClaimName},
		{"sasl.oauthbearer.sub.claim.name", o.SubClaimName},
	} {
		if c.v == "" {
			return o, invalid(o.Source[c.key], c.v, "The OAuth configuration option %s value must be non-empty", c.key)
		}
	}
	urlKey := o.Source["sasl.oauthbearer.jwks.endpoint.url"]
	if o.JWKSURL == "" {
		return o, invalid(urlKey, "null", "listener %s: %s validates tokens against the keys of a JWKS: set sasl.oauthbearer.jwks.endpoint.url (a file: or http(s): URL)", ls.Listener, OAuthBearerJWTValidator)
	}
	u, err := url.Parse(o.JWKSURL)
	if err != nil {
		return o, invalid(urlKey, o.JWKSURL, "The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a URL (%s) that is malformed: %v", o.JWKSURL, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "file", "http", "https":
	default:
		return o, invalid(urlKey, o.JWKSURL, "The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a URL (%s) that contains an invalid protocol (%s); only \"http\", \"https\", and \"file\" protocol are supported", o.JWKSURL, u.Scheme)
	}
	return o, nil
}
