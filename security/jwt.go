package security

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/config"
)

// JWT validation as Kafka's OAuthBearerValidatorCallbackHandler does it
// (KIP-768): a JWS signed with RS256/384/512, PS256/384/512 or
// ES256/384/512 by a key of the listener's JSON Web Key Set, whose claims
// pass the checks of Kafka 4.4's BrokerJwtValidator and its jose4j
// consumer (exp and iat required, exp and nbf with
// sasl.oauthbearer.clock.skew.seconds, the expected audience and issuer
// unless waived by sasl.oauthbearer.allow.unverified.*), then Kafka's own (a non-blank subject, scopes without
// duplicates). Every failure is answered {"status":"invalid_token"}, as
// Kafka does; the reason goes to the broker's log.

// jwk is one verification key of a JWKS.
type jwk struct {
	kid, alg, use string
	key           crypto.PublicKey
}

type jwtValidator struct {
	keys              atomic.Pointer[[]jwk]
	audience          []string
	issuer            string
	subClaim          string
	scopeClaim        string
	skew              time.Duration
	refresh           chan struct{} // asks an http(s) JWKS's refresher to fetch now
	hasExpectedIssuer bool
	// skipAudience: sasl.oauthbearer.allow.unverified.audience without an
	// expected audience, jose4j's setSkipDefaultAudienceValidation.
	skipAudience bool
}

func newJWTValidator(o config.OAuthBearerSettings, log *slog.Logger) (*jwtValidator, func(), error) {
	v := &jwtValidator{
		audience:          o.ExpectedAudience,
		issuer:            o.ExpectedIssuer,
		hasExpectedIssuer: o.ExpectedIssuer != "",
		subClaim:          o.SubClaimName,
		scopeClaim:        o.ScopeClaimName,
		skew:              time.Duration(o.ClockSkewSeconds) * time.Second,
		skipAudience:      len(o.ExpectedAudience) == 0 && o.AllowUnverifiedAudience,
	}
	u, err := url.Parse(o.JWKSURL)
	if err != nil {
		return nil, nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %w", err)
	}
	if strings.EqualFold(u.Scheme, "file") {
		data, err := os.ReadFile(u.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: read the JWKS: %w", err)
		}
		keys, err := parseJWKS(data)
		if err != nil {
			return nil, nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %s: %w", o.JWKSURL, err)
		}
		v.keys.Store(&keys)
		return v, nil, nil
	}
	// http(s): fetched now, so a wrong URL stops start-up, then again
	// every refresh.ms and when a token names a key id not held.
	ctx, cancel := context.WithCancel(context.Background())
	keys, err := fetchJWKS(ctx, o.JWKSURL)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %w", err)
	}
	v.keys.Store(&keys)
	v.refresh = make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.refreshLoop(ctx, o, log)
	}()
	return v, func() { cancel(); <-done }, nil
}

// refreshLoop fetches an http(s) JWKS again every refresh.ms, or sooner
// when asked, backing off between failed attempts as Kafka's
// RefreshingHttpsJwks.
func (v *jwtValidator) refreshLoop(ctx context.Context, o config.OAuthBearerSettings, log *slog.Logger) {
	every := time.Duration(o.JWKSRefreshMs) * time.Millisecond
	if every <= 0 {
		every = time.Hour
	}
	// A token with an unknown key id asks for a fetch at most this often.
	const minExpedited = 10 * time.Second
	t := time.NewTimer(every)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-v.refresh:
			if time.Since(last) < minExpedited {
				continue
			}
		}
		last = time.Now()
		backoff := time.Duration(o.JWKSRetryBackoffMs) * time.Millisecond
		for {
			keys, err := fetchJWKS(ctx, o.JWKSURL)
			if err == nil {
				v.keys.Store(&keys)
				break
			}
			log.Warn("fetching the OAUTHBEARER JWKS failed", "url", o.JWKSURL, "err", err, "retry", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff+time.Millisecond, time.Duration(o.JWKSRetryBackoffMaxMs)*time.Millisecond)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(every)
	}
}

func fetchJWKS(ctx context.Context, u string) ([]jwk, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: HTTP %s", u, resp.Status)
	}
	// A key set is small; a server sending more is not one.
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", u, err)
	}
	return parseJWKS(data)
}

// parseJWKS reads the RSA and EC keys of a JWKS (RFC 7517); keys of
// other types are skipped, as jose4j does.
func parseJWKS(data []byte) ([]jwk, error) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	if set.Keys == nil {
		return nil, errors.New("parse JWKS: no \"keys\" member")
	}
	var out []jwk
	for i, m := range set.Keys {
		str := func(k string) string { s, _ := m[k].(string); return s }
		k := jwk{kid: str("kid"), alg: str("alg"), use: str("use")}
		switch str("kty") {
		case "RSA":
			n, err1 := b64uInt(str("n"))
			e, err2 := b64uInt(str("e"))
			if err := errors.Join(err1, err2); err != nil || !e.IsInt64() {
				return nil, fmt.Errorf("parse JWKS: key %d: bad RSA n or e: %v", i, err)
			}
			k.key = &rsa.PublicKey{N: n, E: int(e.Int64())}
		case "EC":
			var curve elliptic.Curve
			switch str("crv") {
			case "P-256":
				curve = elliptic.P256()
			case "P-384":
				curve = elliptic.P384()
			case "P-521":
				curve = elliptic.P521()
			default:
				continue
			}
			x, err1 := b64uInt(str("x"))
			y, err2 := b64uInt(str("y"))
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("parse JWKS: key %d: bad EC x or y: %w", i, err)
			}
			pub := &ecdsa.PublicKey{Curve: curve, X: x, Y: y}
			if !curve.IsOnCurve(x, y) {
				return nil, fmt.Errorf("parse JWKS: key %d: EC point not on %s", i, str("crv"))
			}
			k.key = pub
		default:
			continue
		}
		out = append(out, k)
	}
	return out, nil
}

func b64uInt(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, errors.New("empty")
	}
	return new(big.Int).SetBytes(b), nil
}

// jwsAlgs are the signature algorithms served: their hash, and for EC
// the curve's size.
var jwsAlgs = map[string]struct {
	hash crypto.Hash
	kty  string
	pss  bool
	crv  string
}{
	"RS256": {crypto.SHA256, "RSA", false, ""}, "RS384": {crypto.SHA384, "RSA", false, ""}, "RS512": {crypto.SHA512, "RSA", false, ""},
	"PS256": {crypto.SHA256, "RSA", true, ""}, "PS384": {crypto.SHA384, "RSA", true, ""}, "PS512": {crypto.SHA512, "RSA", true, ""},
	"ES256": {crypto.SHA256, "EC", false, "P-256"}, "ES384": {crypto.SHA384, "EC", false, "P-384"}, "ES512": {crypto.SHA512, "EC", false, "P-521"},
}

func digest(h crypto.Hash, data []byte) []byte {
	switch h {
	case crypto.SHA384:
		d := sha512.Sum384(data)
		return d[:]
	case crypto.SHA512:
		d := sha512.Sum512(data)
		return d[:]
	}
	d := sha256.Sum256(data)
	return d[:]
}

func (v *jwtValidator) validate(token string, now time.Time) (*OAuthToken, *tokenFailure, error) {
	tok, reason := v.check(token, now)
	if reason != "" {
		return nil, invalidToken("Could not validate the access token: %s", reason), nil
	}
	return tok, nil, nil
}

// check returns the token, or why it is refused.
func (v *jwtValidator) check(token string, now time.Time) (*OAuthToken, string) {
	// Kafka's SerializedJwt.
	token = strings.TrimSpace(token)
	parts := strings.Split(token, ".")
	if len(parts) != 3 || slices.Contains(parts, "") {
		return nil, "Malformed JWT provided; expected three sections (header, payload, and signature)"
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeB64JSON(parts[0], &header); err != nil {
		return nil, "malformed JOSE header: " + err.Error()
	}
	alg, ok := jwsAlgs[header.Alg]
	if !ok {
		return nil, fmt.Sprintf("'%s' is not a permitted algorithm", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "="))
	if err != nil {
		return nil, "malformed signature: " + err.Error()
	}
	key, reason := v.selectKey(header.Alg, header.Kid, alg.kty, alg.crv)
	if reason != "" {
		return nil, reason
	}
	d := digest(alg.hash, []byte(parts[0]+"."+parts[1]))
	switch pub := key.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < 2048 {
			return nil, fmt.Sprintf("An RSA key of size 2048 bits or larger MUST be used with the all JOSE RSA algorithms (given key was only %d bits)", pub.N.BitLen())
		}
		if alg.pss {
			err = rsa.VerifyPSS(pub, alg.hash, d, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		} else {
			err = rsa.VerifyPKCS1v15(pub, alg.hash, d, sig)
		}
		if err != nil {
			return nil, "JWS signature is invalid"
		}
	case *ecdsa.PublicKey:
		size := (pub.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return nil, "JWS signature is invalid"
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(pub, d, r, s) {
			return nil, "JWS signature is invalid"
		}
	}
	var claims map[string]any
	if err := decodeB64JSON(parts[1], &claims); err != nil || claims == nil {
		return nil, "malformed JWT claims"
	}
	exp, reason := numericDate(claims, "exp")
	if reason != "" {
		return nil, reason
	}
	iat, reason := numericDate(claims, "iat")
	if reason != "" {
		return nil, reason
	}
	nbf, reason := numericDate(claims, "nbf")
	if reason != "" {
		return nil, reason
	}
	nowS, skewS := now.Unix(), int64(v.skew/time.Second)
	switch {
	case exp == nil:
		return nil, "No Expiration Time (exp) claim present."
	case iat == nil:
		return nil, "No Issued At (iat) claim present."
	case nowS-skewS >= *exp:
		return nil, fmt.Sprintf("The JWT is no longer valid - the evaluation time %d is on or after the Expiration Time (exp=%d) claim value", nowS, *exp)
	case *exp < *iat:
		return nil, fmt.Sprintf("The Expiration Time (exp=%d) claim value cannot be before the Issued At (iat=%d) claim value.", *exp, *iat)
	case nbf != nil && *exp < *nbf:
		return nil, fmt.Sprintf("The Expiration Time (exp=%d) claim value cannot be before the Not Before (nbf=%d) claim value.", *exp, *nbf)
	case nbf != nil && nowS+skewS < *nbf:
		return nil, fmt.Sprintf("The JWT is not yet valid as the evaluation time %d is before the Not Before (nbf=%d) claim time", nowS, *nbf)
	}
	if !v.skipAudience {
		if reason := v.checkAudience(claims["aud"]); reason != "" {
			return nil, reason
		}
	}
	if v.hasExpectedIssuer {
		iss, ok := claims["iss"].(string)
		if !ok || iss != v.issuer {
			return nil, fmt.Sprintf("Issuer (iss) claim value (%v) doesn't match expected value of %s", claims["iss"], v.issuer)
		}
	}
	// Kafka's ClaimValidationUtils.
	sub, ok := claims[v.subClaim].(string)
	if _, present := claims[v.subClaim]; present && !ok {
		return nil, fmt.Sprintf("Could not extract the '%s' claim from the access token", v.subClaim)
	}
	if sub = strings.TrimSpace(sub); sub == "" {
		return nil, fmt.Sprintf("%s value must be non-null, non-empty and not only whitespace", v.subClaim)
	}
	var scope []string
	switch sc := claims[v.scopeClaim].(type) {
	case string:
		scope = []string{sc}
	case []any:
		for _, it := range sc {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Sprintf("%s value must be a list of strings", v.scopeClaim)
			}
			scope = append(scope, s)
		}
	}
	seen := make([]string, 0, len(scope))
	for _, s := range scope {
		if s = strings.TrimSpace(s); s == "" {
			return nil, fmt.Sprintf("%s value must be non-empty and not only whitespace", v.scopeClaim)
		}
		if slices.Contains(seen, s) {
			return nil, fmt.Sprintf("%s value must not contain duplicates - %s already present", v.scopeClaim, s)
		}
		seen = append(seen, s)
	}
	if *exp < 0 || *iat < 0 {
		return nil, "exp and iat values must be non-negative"
	}
	return &OAuthToken{Principal: sub, Scope: seen, Expiry: time.Unix(*exp, 0)}, ""
}

// selectKey picks the JWKS key for a JWS header as jose4j's
// VerificationJwkSelector: the key id when the header names one, the
// key type and curve of the algorithm, a use of sig or none, an alg of
// the header's or none; the first such key.
func (v *jwtValidator) selectKey(alg, kid, kty, crv string) (crypto.PublicKey, string) {
	keys := v.keys.Load()
	for _, k := range *keys {
		if kid != "" && k.kid != kid || k.use != "" && k.use != "sig" || k.alg != "" && k.alg != alg {
			continue
		}
		switch pub := k.key.(type) {
		case *rsa.PublicKey:
			if kty == "RSA" {
				return pub, ""
			}
		case *ecdsa.PublicKey:
			if kty == "EC" && pub.Curve.Params().Name == crv {
				return pub, ""
			}
		}
	}
	if v.refresh != nil {
		select {
		case v.refresh <- struct{}{}:
		default:
		}
	}
	return nil, fmt.Sprintf("Unable to find a suitable verification key for JWS w/ header {\"alg\":%q,\"kid\":%q} from %d keys", alg, kid, len(*keys))
}

// checkAudience is jose4j's AudValidator: with expected audiences, the
// aud claim (a string or a list of them) must name one; without, a token
// must not have an aud claim.
func (v *jwtValidator) checkAudience(aud any) string {
	var auds []string
	switch a := aud.(type) {
	case nil:
	case string:
		auds = []string{a}
	case []any:
		for _, it := range a {
			s, ok := it.(string)
			if !ok {
				return "The value of the 'aud' claim is not an array of strings or a single string value."
			}
			auds = append(auds, s)
		}
	default:
		return "The value of the 'aud' claim is not an array of strings or a single string value."
	}
	switch {
	case aud == nil && len(v.audience) > 0:
		return "No Audience (aud) claim present."
	case aud != nil && len(v.audience) == 0:
		return fmt.Sprintf("Audience (aud) claim %v present in the JWT but no expected audience value(s) were provided to the JWT Consumer.", auds)
	}
	for _, a := range auds {
		if slices.Contains(v.audience, a) {
			return ""
		}
	}
	if aud == nil {
		return ""
	}
	return fmt.Sprintf("Audience (aud) claim %v doesn't contain an acceptable identifier. Expected one of %v as an aud value.", auds, v.audience)
}

// numericDate is a NumericDate claim in whole seconds, nil when absent.
func numericDate(claims map[string]any, name string) (*int64, string) {
	switch x := claims[name].(type) {
	case nil:
		return nil, ""
	case float64:
		s := int64(x)
		return &s, ""
	default:
		return nil, fmt.Sprintf("The value of the '%s' claim is not the expected type (%v - %T)", name, x, x)
	}
}

func decodeB64JSON(part string, into any) error {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}
