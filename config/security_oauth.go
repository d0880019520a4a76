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
	// (Its pre-3.4 name in the .secured package is gone from Kafka 4, and
	// refused as Kafka 4 refuses it.)
	OAuthBearerJWTValidator = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
)

// The JWT validators of sasl.oauthbearer.jwt.validator.class (KIP-1139,
// Kafka 4.1) that check a signature against the JWKS: Kafka's default,
// which on a broker with a JWKS URL is BrokerJwtValidator, and that one.
const (
	defaultJwtValidator = "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator"
	brokerJwtValidator  = "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"
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
		doc: "Audiences of which a JWT's aud claim must name one; required by OAuthBearerValidatorCallbackHandler unless sasl.oauthbearer.allow.unverified.audience=true."},
	{name: "sasl.oauthbearer.expected.issuer", typ: TypeString, null: true,
		doc: "The issuer a JWT's iss claim must be; required by OAuthBearerValidatorCallbackHandler unless sasl.oauthbearer.allow.unverified.issuer=true."},
	{name: "sasl.oauthbearer.scope.claim.name", typ: TypeString, dflt: "scope",
		doc: "The claim holding a JWT's scopes."},
	{name: "sasl.oauthbearer.sub.claim.name", typ: TypeString, dflt: "sub",
		doc: "The claim holding a JWT's subject, the principal's name (User:<subject>)."},
	{name: "sasl.oauthbearer.allow.unverified.audience", typ: TypeBoolean, dflt: "false",
		doc: "Whether OAuthBearerValidatorCallbackHandler may run without sasl.oauthbearer.expected.audience, accepting a JWT whatever its aud claim (Kafka 4.4); without either, start-up is refused."},
	{name: "sasl.oauthbearer.allow.unverified.issuer", typ: TypeBoolean, dflt: "false",
		doc: "Whether OAuthBearerValidatorCallbackHandler may run without sasl.oauthbearer.expected.issuer, accepting a JWT whatever its iss claim (Kafka 4.4); without either, start-up is refused."},
	{name: "sasl.oauthbearer.jwt.validator.class", typ: TypeClass, dflt: defaultJwtValidator,
		doc: "The JWT validator of OAuthBearerValidatorCallbackHandler: Kafka's DefaultJwtValidator or BrokerJwtValidator (the same on a broker), which check the signature against sasl.oauthbearer.jwks.endpoint.url; no other class can run."},
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
	JWKSURL                 string
	JWKSRefreshMs           int64
	JWKSRetryBackoffMs      int64
	JWKSRetryBackoffMaxMs   int64
	ExpectedAudience        []string
	ExpectedIssuer          string
	AllowUnverifiedAudience bool
	AllowUnverifiedIssuer   bool
	ScopeClaimName          string
	SubClaimName            string
	ClockSkewSeconds        int32
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
	case OAuthBearerJWTValidator:
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
		case "sasl.oauthbearer.allow.unverified.audience":
			o.AllowUnverifiedAudience = r.v.b
		case "sasl.oauthbearer.allow.unverified.issuer":
			o.AllowUnverifiedIssuer = r.v.b
		case "sasl.oauthbearer.jwt.validator.class":
			if c := r.v.s; c != defaultJwtValidator && c != brokerJwtValidator {
				return o, invalid(r.name, c, "listener %s: JWTs are validated as Kafka's %s (or %s) does; no other class can run", ls.Listener, defaultJwtValidator, brokerJwtValidator)
			}
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
		// Kafka 4's message.
		return o, invalid(urlKey, "null", `The OAuth validator for the broker requires "sasl.oauthbearer.jwks.endpoint.url" to be configured so that JWT signatures can be verified, but it was not set. Set "sasl.oauthbearer.jwks.endpoint.url" to the OAuth/OIDC provider's JWKS endpoint URL for this listener (listener %s; a file: or http(s): URL)`, ls.Listener)
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
	// Kafka 4.4's BrokerJwtValidator: the audience and the issuer are
	// checked unless explicitly waived.
	if len(o.ExpectedAudience) == 0 && !o.AllowUnverifiedAudience {
		return o, invalid(o.Source["sasl.oauthbearer.expected.audience"], "null", `The OAuth validator for the broker requires "sasl.oauthbearer.expected.audience" to be configured so that the token's audience ("aud") claim can be verified, but it was not set. Set "sasl.oauthbearer.expected.audience" to the audience(s) that identify this cluster, or set "sasl.oauthbearer.allow.unverified.audience" to true to accept tokens regardless of their audience.`)
	}
	if o.ExpectedIssuer == "" && !o.AllowUnverifiedIssuer {
		return o, invalid(o.Source["sasl.oauthbearer.expected.issuer"], "null", `The OAuth validator for the broker requires "sasl.oauthbearer.expected.issuer" to be configured so that the token's issuer ("iss") claim can be verified, but it was not set. Set "sasl.oauthbearer.expected.issuer" to the issuer URL of the OAuth/OIDC provider that signs the tokens, or set "sasl.oauthbearer.allow.unverified.issuer" to true to accept tokens regardless of their issuer.`)
	}
	return o, nil
}
