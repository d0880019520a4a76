package security

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/config"
)

// SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer serves it
// (KIP-255): the client's first message carries a bearer token; the
// listener's validator either accepts it, and the token's subject is the
// principal, or refuses it with an RFC 7628 error JSON sent as a server
// challenge, to which the client answers with a single 0x01 byte and the
// exchange then fails with that JSON as the message.

// OAuthToken is a validated bearer token.
type OAuthToken struct {
	// Principal is the name the token authenticates (its subject claim).
	Principal string
	// Scope is the token's scope claim.
	Scope []string
	// Expiry is the token's exp claim: the session lasts no longer.
	Expiry time.Time
}

// tokenFailure is a refused token: the RFC 7628 status and, for
// insufficient_scope, the scope wanted. Reason is for the broker's log.
type tokenFailure struct {
	status, scope string
	reason        string
}

// errorJSON is Kafka's jsonErrorResponse, byte for byte.
func (f *tokenFailure) errorJSON() string {
	s := fmt.Sprintf(`{"status":"%s"`, f.status)
	if f.scope != "" {
		s += fmt.Sprintf(`, "scope":"%s"`, f.scope)
	}
	return s + "}"
}

func invalidToken(format string, args ...any) *tokenFailure {
	return &tokenFailure{status: "invalid_token", reason: fmt.Sprintf(format, args...)}
}

// tokenValidator checks one token at the given time.
type tokenValidator interface {
	validate(token string, now time.Time) (*OAuthToken, *tokenFailure, error)
}

// OAuthBearer is the server side of OAUTHBEARER on one listener.
type OAuthBearer struct {
	v   tokenValidator
	now func() time.Time
	// closer stops a JWKS refresher, if any.
	closer func()
}

// NewOAuthBearer builds the listener's validator: Kafka's unsecured one
// (OAuthBearerUnsecuredValidatorCallbackHandler, the default) or its JWT
// one against a JWKS (OAuthBearerValidatorCallbackHandler).
// Its log (nil: slog's default) gets an http(s) JWKS's failed fetches.
func NewOAuthBearer(o config.OAuthBearerSettings, log *slog.Logger) (*OAuthBearer, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := checkBrokerLogin(o.JAAS); err != nil {
		return nil, err
	}
	switch o.Handler {
	case config.OAuthBearerJWTValidator:
		v, closer, err := newJWTValidator(o, log)
		if err != nil {
			return nil, err
		}
		return &OAuthBearer{v: v, now: time.Now, closer: closer}, nil
	case config.OAuthBearerUnsecuredValidator, "":
		v, err := newUnsecuredValidator(o.JAAS)
		if err != nil {
			return nil, err
		}
		return &OAuthBearer{v: v, now: time.Now}, nil
	}
	return nil, fmt.Errorf("OAUTHBEARER validator %s is not supported", o.Handler)
}

// Name is OAUTHBEARER.
func (m *OAuthBearer) Name() string { return config.MechanismOAuthBearer }

// Start begins one client's exchange.
func (m *OAuthBearer) Start() Session { return &oauthSession{m: m} }

// Close stops what the validator runs in the background.
func (m *OAuthBearer) Close() {
	if m.closer != nil {
		m.closer()
	}
}

type oauthSession struct {
	m *OAuthBearer
	// errorJSON is the challenge sent for a refused token; the client's
	// 0x01 answer to it fails the exchange with it.
	errorJSON string
	refusal   string
	token     *OAuthToken
}

// ClientError is a failure that Kafka does not answer: the exchange
// stops and the connection is closed without a response (an unexpected
// exception in Kafka's SASL server, such as a token header without
// "alg").
type ClientError struct{ Err error }

func (e *ClientError) Error() string { return e.Err.Error() }
func (e *ClientError) Unwrap() error { return e.Err }

// Step is OAuthBearerSaslServer.evaluateResponse.
func (s *oauthSession) Step(resp []byte) ([]byte, bool, error) {
	if s.token != nil {
		return nil, false, errors.New("OAUTHBEARER exchange already complete")
	}
	if len(resp) == 1 && resp[0] == 0x01 && s.errorJSON != "" {
		return nil, false, &AuthError{Msg: s.errorJSON}
	}
	s.errorJSON = ""
	authzid, token, err := parseOAuthClientFirst(resp)
	if err != nil {
		// A SaslException: the client sees Kafka's generic message.
		return nil, false, err
	}
	tok, failure, err := s.m.v.validate(token, s.m.now())
	if err != nil {
		return nil, false, &ClientError{Err: err}
	}
	if failure != nil {
		s.errorJSON, s.refusal = failure.errorJSON(), failure.reason
		return []byte(s.errorJSON), false, nil
	}
	if authzid != "" && authzid != tok.Principal {
		return nil, false, authErrorf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", authzid, tok.Principal)
	}
	// Both of Kafka's validators accept every extension.
	s.token = tok
	return []byte{}, true, nil
}

// Refusal says, for the broker's log, why the last token was refused
// (the client is only told the RFC 7628 status).
func (s *oauthSession) Refusal() string { return s.refusal }

func (s *oauthSession) Principal() Principal { return User(s.token.Principal) }

// CredentialExpiry is the token's expiry, which bounds the session
// (KIP-368), whatever connections.max.reauth.ms says.
func (s *oauthSession) CredentialExpiry() (time.Time, bool) {
	if s.token == nil {
		return time.Time{}, false
	}
	return s.token.Expiry, true
}

// The client's first message, OAuthBearerClientInitialResponse's
// pattern: "n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A...]^A".
var (
	oauthClientFirst = regexp.MustCompile(`^n,(?:a=((?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01$`)
	oauthAuthValue   = regexp.MustCompile(`^(\w+) +([-_~+/.a-zA-Z0-9]+=*)$`)
)

func parseOAuthClientFirst(resp []byte) (authzid, token string, err error) {
	m := oauthClientFirst.FindSubmatch(resp)
	if m == nil {
		return "", "", errors.New("Invalid OAUTHBEARER client first message")
	}
	authzid = string(m[1])
	var auth string
	found := false
	for _, kv := range strings.Split(string(m[2]), "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if k == "auth" {
			auth, found = v, true
		}
	}
	if !found {
		return "", "", errors.New("Invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	am := oauthAuthValue.FindStringSubmatch(auth)
	if am == nil {
		return "", "", errors.New("Invalid OAUTHBEARER client first message: invalid 'auth' format")
	}
	if !strings.EqualFold(am[1], "bearer") {
		return "", "", fmt.Errorf("Invalid scheme in OAUTHBEARER client first message: %s", am[1])
	}
	return authzid, am[2], nil
}

// unsecuredValidator is Kafka's OAuthBearerUnsecuredValidatorCallbackHandler
// with its options (OAuthBearerLoginModule's JAAS options):
// unsecuredValidatorPrincipalClaimName (sub), unsecuredValidatorScopeClaimName
// (scope), unsecuredValidatorRequiredScope (space-separated) and
// unsecuredValidatorAllowableClockSkewMs (0).
type unsecuredValidator struct {
	principalClaim, scopeClaim string
	requiredScope              []string
	skew                       time.Duration
}

// oauthLoginModule is the login module of an OAUTHBEARER JAAS config.
const oauthLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

func newUnsecuredValidator(jaas string) (*unsecuredValidator, error) {
	e, err := ParseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	if e.LoginModule != oauthLoginModule {
		return nil, fmt.Errorf("login module %s is not %s", e.LoginModule, oauthLoginModule)
	}
	v := &unsecuredValidator{principalClaim: "sub", scopeClaim: "scope"}
	if s := strings.TrimSpace(e.Options["unsecuredValidatorPrincipalClaimName"]); s != "" {
		v.principalClaim = s
	}
	if s := strings.TrimSpace(e.Options["unsecuredValidatorScopeClaimName"]); s != "" {
		v.scopeClaim = s
	}
	v.requiredScope = parseScope(e.Options["unsecuredValidatorRequiredScope"])
	if s := strings.TrimSpace(e.Options["unsecuredValidatorAllowableClockSkewMs"]); s != "" {
		ms, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs: %w", err)
		}
		if ms < 0 {
			return nil, fmt.Errorf("Allowable clock skew millis must not be negative: %s", s)
		}
		v.skew = time.Duration(ms) * time.Millisecond
	}
	return v, nil
}

// checkBrokerLogin refuses what Kafka's broker refuses at start: its
// OAuthBearerLoginModule also logs the broker itself in, with an
// unsecured token from the JAAS options (Kafka's default login callback
// handler), and that token needs a principal, unsecuredLoginStringClaim_sub
// (or the claim unsecuredLoginPrincipalClaimName names).
func checkBrokerLogin(jaas string) error {
	e, err := ParseJAAS(jaas)
	if err != nil {
		return err
	}
	if e.LoginModule != oauthLoginModule {
		return fmt.Errorf("login module %s is not %s", e.LoginModule, oauthLoginModule)
	}
	claim := "sub"
	if c := strings.TrimSpace(e.Options["unsecuredLoginPrincipalClaimName"]); c != "" {
		claim = c
	}
	if strings.TrimSpace(e.Options["unsecuredLoginStringClaim_"+claim]) == "" {
		return fmt.Errorf("No principal name in JWT claim: %s (the broker's own OAuthBearerLoginModule login, as in Kafka: set unsecuredLoginStringClaim_%s in the JAAS config)", claim, claim)
	}
	return nil
}

// parseScope is OAuthBearerScopeUtils.parseScope: space-separated, empty
// items dropped.
func parseScope(s string) []string {
	var out []string
	for _, item := range strings.Split(strings.TrimSpace(s), " ") {
		if item != "" {
			out = append(out, item)
		}
	}
	return out
}

// javaList is a list as Java's AbstractCollection.toString writes it.
func javaList(items []string) string { return "[" + strings.Join(items, ", ") + "]" }

// validate is OAuthBearerUnsecuredJws's parsing and the handler's checks,
// in Kafka's order.
func (v *unsecuredValidator) validate(token string, now time.Time) (*OAuthToken, *tokenFailure, error) {
	if strings.Contains(token, "..") {
		return nil, invalidToken("Malformed compact serialization contains '..'"), nil
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalidToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"), nil
	}
	header, f := unsecuredSection(parts[0])
	if f != nil {
		return nil, f, nil
	}
	claims, f := unsecuredSection(parts[1])
	if f != nil {
		return nil, f, nil
	}
	alg, ok := header["alg"]
	if !ok {
		// A NullPointerException in Kafka: the connection is dropped.
		return nil, nil, errors.New("JWS header must have an Algorithm value")
	}
	if javaText(alg) != "none" {
		return nil, invalidToken("Unsecured JWS must have 'none' for an algorithm"), nil
	}
	if parts[2] != "" {
		return nil, invalidToken("Unsecured JWS must not contain a digital signature"), nil
	}
	// The scope: a string is one scope, a list its non-blank items.
	var scope []string
	switch sc := claims[v.scopeClaim].(type) {
	case nil:
	case string:
		if s := strings.TrimSpace(sc); s != "" {
			scope = []string{s}
		}
	case []string:
		for _, s := range sc {
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(scope, s) {
				scope = append(scope, s)
			}
		}
	default:
		return nil, invalidToken("The '%s' claim was not of type List: %s", v.scopeClaim, javaType(sc)), nil
	}
	exp, f := numberClaim(claims, "exp")
	if f != nil {
		return nil, f, nil
	}
	if exp == nil {
		return nil, invalidToken("No expiration time in JWT"), nil
	}
	var principal string
	switch p := claims[v.principalClaim].(type) {
	case nil:
	case string:
		principal = p
	default:
		return nil, invalidToken("The '%s' claim was not of type String: %s", v.principalClaim, javaType(p)), nil
	}
	if strings.TrimSpace(principal) == "" {
		return nil, invalidToken("No principal name in JWT claim: %s", v.principalClaim), nil
	}
	iat, f := numberClaim(claims, "iat")
	if f != nil {
		return nil, f, nil
	}
	nowMs := float64(now.UnixMilli())
	skewMs := float64(v.skew.Milliseconds())
	if iat != nil && 1000**iat > nowMs+skewMs {
		return nil, invalidToken("The Issued At value (%f seconds) was after the indicated time (%d ms) plus allowable clock skew (%d ms)", *iat, now.UnixMilli(), v.skew.Milliseconds()), nil
	}
	if nowMs-skewMs >= 1000**exp {
		return nil, invalidToken("The indicated time (%d ms) minus allowable clock skew (%d ms) was on or after the Expiration Time value (%f seconds)", now.UnixMilli(), v.skew.Milliseconds(), *exp), nil
	}
	if iat != nil && *exp <= *iat {
		return nil, invalidToken("The Expiration Time time (%f seconds) was not after the Issued At time (%f seconds)", *exp, *iat), nil
	}
	for _, want := range v.requiredScope {
		if !slices.Contains(scope, want) {
			return nil, &tokenFailure{status: "insufficient_scope", scope: javaList(v.requiredScope),
				reason: fmt.Sprintf("The provided scope (%s) was missing a required scope (%s).  All required scope elements: %s", javaList(scope), want, javaList(v.requiredScope))}, nil
		}
	}
	return &OAuthToken{Principal: principal, Scope: scope, Expiry: time.UnixMilli(int64(math.Round(*exp * 1000)))}, nil, nil
}

// unsecuredSection decodes one part of an unsecured JWS as Kafka 4's
// OAuthBearerUnsecuredJws.toMap: Base64URL (padding optional), a JSON
// object whose arrays become lists of their
// items' text, numbers stay numbers and anything else becomes its text.
func unsecuredSection(part string) (map[string]any, *tokenFailure) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return nil, invalidToken("malformed Base64 URL encoded value")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, invalidToken("malformed JSON")
	}
	out := map[string]any{}
	obj, _ := v.(map[string]any)
	for k, val := range obj {
		switch x := val.(type) {
		case []any:
			items := make([]string, 0, len(x))
			for _, it := range x {
				items = append(items, javaText(it))
			}
			out[k] = items
		case json.Number:
			out[k] = x
		default:
			out[k] = javaText(x)
		}
	}
	return out, nil
}

// javaText is Jackson's JsonNode.asText of a decoded JSON value.
func javaText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return ""
}

// javaType names a claim's Java type in Kafka's messages.
func javaType(v any) string {
	switch v.(type) {
	case string:
		return "String"
	case json.Number:
		return "Number"
	case []string:
		return "ArrayList"
	}
	return "Object"
}

// numberClaim is a numeric claim, nil when absent.
func numberClaim(claims map[string]any, name string) (*float64, *tokenFailure) {
	switch x := claims[name].(type) {
	case nil:
		return nil, nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, invalidToken("The '%s' claim was not of type Number", name)
		}
		return &f, nil
	default:
		return nil, invalidToken("The '%s' claim was not of type Number: %s", name, javaType(x))
	}
}
