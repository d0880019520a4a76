package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// unsecuredJWS builds the token Kafka's OAuthBearerUnsecuredLoginCallbackHandler
// makes from OAuthBearerLoginModule's unsecuredLogin* options: an
// unsigned JWS ({"alg":"none"}) whose claims are iat, exp (iat plus
// unsecuredLoginLifetimeSeconds, 3600 by default) and the
// unsecuredLoginStringClaim_<name>, unsecuredLoginNumberClaim_<name> and
// unsecuredLoginListClaim_<name> options (a list's first character is
// its separator). The principal claim (unsecuredLoginPrincipalClaimName,
// sub by default) must be among them, as Kafka requires. Only brokers
// that accept unsecured tokens (Kafka's default validator, for
// development) take it.
func unsecuredJWS(opts map[string]string, now time.Time) (string, error) {
	claims := map[string]any{}
	lifetime := int64(3600)
	principalClaim := "sub"
	for k, v := range opts {
		switch {
		case k == "unsecuredLoginLifetimeSeconds":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return "", fmt.Errorf("unsecuredLoginLifetimeSeconds %q is not a positive number of seconds", v)
			}
			lifetime = n
		case k == "unsecuredLoginPrincipalClaimName":
			principalClaim = v
		case k == "unsecuredLoginScopeClaimName":
			// Names the claim the scope is read from; the list itself is
			// a ListClaim option.
		case strings.HasPrefix(k, "unsecuredLoginStringClaim_"):
			claims[strings.TrimPrefix(k, "unsecuredLoginStringClaim_")] = v
		case strings.HasPrefix(k, "unsecuredLoginNumberClaim_"):
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return "", fmt.Errorf("%s %q is not a number", k, v)
			}
			claims[strings.TrimPrefix(k, "unsecuredLoginNumberClaim_")] = n
		case strings.HasPrefix(k, "unsecuredLoginListClaim_"):
			if v == "" {
				return "", fmt.Errorf("%s is empty (its first character is the separator)", k)
			}
			var list []string
			for _, e := range strings.Split(v[1:], v[:1]) {
				if e != "" {
					list = append(list, e)
				}
			}
			claims[strings.TrimPrefix(k, "unsecuredLoginListClaim_")] = list
		default:
			return "", fmt.Errorf("option %s is not one OAuthBearerLoginModule's unsecured login reads", k)
		}
	}
	if s, _ := claims[principalClaim].(string); s == "" {
		return "", fmt.Errorf("no principal: set unsecuredLoginStringClaim_%s", principalClaim)
	}
	for _, reserved := range []string{"iat", "exp"} {
		if _, ok := claims[reserved]; ok {
			return "", fmt.Errorf("the %s claim is set from the time and unsecuredLoginLifetimeSeconds, not by an option", reserved)
		}
	}
	claims["iat"] = now.Unix()
	claims["exp"] = now.Unix() + lifetime
	enc := func(v any) (string, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("encode unsecured token: %w", err)
		}
		return base64.RawURLEncoding.EncodeToString(b), nil
	}
	h, err := enc(map[string]string{"alg": "none"})
	if err != nil {
		return "", err
	}
	p, err := enc(claims)
	if err != nil {
		return "", err
	}
	return h + "." + p + ".", nil
}
