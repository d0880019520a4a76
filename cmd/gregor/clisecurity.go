package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/gregorbroker/gregor/config"
)

// clientSecurity is how a command authenticates and encrypts its
// connections: the flags kcat and rpk have, or a Kafka client properties
// file (--command-config), with the flags winning over the file.
type clientSecurity struct {
	commandConfig string
	mechanism     string
	user          string
	password      string
	token         string
	// unsecuredLogin is OAuthBearerLoginModule's unsecuredLogin*
	// options from --command-config, for a token built here.
	unsecuredLogin map[string]string
	tls            bool
	tlsCA          string
	tlsCert        string
	tlsKey         string
	insecure       bool
}

// securityFlags registers the client security flags on every command.
func (c *cmd) securityFlags() { c.sec.register(c.fs) }

// securityOpts turns the security flags and --command-config into client
// options.
func (c *cmd) securityOpts() ([]kgo.Opt, error) { return c.sec.opts(c.fs, c.path) }

// register adds the security flags to fs.
func (s *clientSecurity) register(fs *flag.FlagSet) {
	fs.StringVar(&s.commandConfig, "command-config", "", "a Kafka client properties `file` (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*/ssl.keystore.* of type PEM)")
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "authenticate with SASL: `PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER`")
	fs.StringVar(&s.user, "sasl-user", os.Getenv("GREGOR_SASL_USER"), "the SASL `user` (env GREGOR_SASL_USER)")
	fs.StringVar(&s.password, "sasl-password", "", "the SASL `password` (env GREGOR_SASL_PASSWORD)")
	fs.StringVar(&s.token, "sasl-token", "", "the OAUTHBEARER `token` (a JWT; env GREGOR_SASL_TOKEN)")
	fs.BoolVar(&s.tls, "tls", false, "connect with TLS (implied by the other --tls-* flags)")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "a PEM `file` of the CA certificates to trust, instead of the system's")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "a PEM client certificate `file`, for mutual TLS (with --tls-key)")
	fs.StringVar(&s.tlsKey, "tls-key", "", "the PEM private key `file` of --tls-cert")
	fs.BoolVar(&s.insecure, "tls-insecure-skip-verify", false, "do not verify the broker's certificate (tests only)")
}

// opts turns the flags parsed by fs and --command-config into client
// options; op names the command in errors.
func (s clientSecurity) opts(fs *flag.FlagSet, op string) ([]kgo.Opt, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if s.commandConfig != "" {
		file, err := readCommandConfig(s.commandConfig)
		if err != nil {
			return nil, fmt.Errorf("%s: --command-config: %w", op, err)
		}
		file.merge(&s, set)
	}
	if s.password == "" && !set["sasl-password"] {
		s.password = os.Getenv("GREGOR_SASL_PASSWORD")
	}
	if s.token == "" && !set["sasl-token"] {
		s.token = os.Getenv("GREGOR_SASL_TOKEN")
	}
	var opts []kgo.Opt
	if strings.EqualFold(s.mechanism, "OAUTHBEARER") {
		if set["sasl-user"] || set["sasl-password"] {
			return nil, usagef("%s: --sasl-mechanism OAUTHBEARER takes --sasl-token, not --sasl-user or --sasl-password", op)
		}
		token := s.token
		if token == "" && s.unsecuredLogin != nil {
			t, err := unsecuredJWS(s.unsecuredLogin, time.Now())
			if err != nil {
				return nil, fmt.Errorf("%s: --command-config: sasl.jaas.config: %w", op, err)
			}
			token = t
		}
		if token == "" {
			return nil, usagef("%s: --sasl-mechanism OAUTHBEARER needs --sasl-token (or GREGOR_SASL_TOKEN, or --command-config with OAuthBearerLoginModule's unsecuredLogin options)", op)
		}
		opts = append(opts, kgo.SASL(oauth.Auth{Token: token}.AsMechanism()))
	} else if set["sasl-token"] {
		return nil, usagef("%s: --sasl-token needs --sasl-mechanism OAUTHBEARER", op)
	} else if s.mechanism != "" {
		if s.user == "" {
			return nil, usagef("%s: --sasl-mechanism %s needs --sasl-user (or GREGOR_SASL_USER)", op, s.mechanism)
		}
		m, err := saslMechanism(s.mechanism, s.user, s.password)
		if err != nil {
			return nil, usagef("%s: %v", op, err)
		}
		opts = append(opts, kgo.SASL(m))
	} else if set["sasl-user"] || set["sasl-password"] {
		return nil, usagef("%s: --sasl-user and --sasl-password need --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512", op)
	}
	if s.tls || s.tlsCA != "" || s.tlsCert != "" || s.tlsKey != "" || s.insecure {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

// saslMechanism returns franz-go's mechanism for a Kafka mechanism name.
func saslMechanism(name, user, pass string) (sasl.Mechanism, error) {
	switch strings.ToUpper(name) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("SASL mechanism %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", name)
}

// tlsConfig builds the TLS configuration: the CA file or the system's
// roots, and a client certificate for mutual TLS.
func (s clientSecurity) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.insecure}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA: %s holds no PEM certificate", s.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if s.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// commandConfig is what a Kafka client properties file asks for.
type commandConfig struct {
	protocol  string
	mechanism string
	user      string
	password  string
	trustPEM  string
	keyPEM    string
	// unsecuredLogin is OAuthBearerLoginModule's options.
	unsecuredLogin map[string]string
}

// merge applies the file under the flags given on the command line.
func (f commandConfig) merge(s *clientSecurity, set map[string]bool) {
	if f.mechanism != "" && !set["sasl-mechanism"] {
		s.mechanism = f.mechanism
	}
	if f.user != "" && !set["sasl-user"] {
		s.user = f.user
	}
	if f.password != "" && !set["sasl-password"] {
		s.password = f.password
	}
	if f.unsecuredLogin != nil {
		s.unsecuredLogin = f.unsecuredLogin
	}
	if strings.HasSuffix(f.protocol, "SSL") {
		s.tls = true
	}
	if f.trustPEM != "" && !set["tls-ca"] {
		s.tlsCA = f.trustPEM
	}
	// Kafka's PEM key store is one file with the key and its chain.
	if f.keyPEM != "" && !set["tls-cert"] && !set["tls-key"] {
		s.tlsCert, s.tlsKey = f.keyPEM, f.keyPEM
	}
}

// jaasRe reads the module and its username/password options from a
// sasl.jaas.config value.
var (
	jaasModuleRe = regexp.MustCompile(`^\s*([\w.]+)\s+required\b`)
	jaasOptionRe = regexp.MustCompile(`(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"`)
)

// readCommandConfig reads a Kafka client properties file. A key it does
// not apply is an error, so that a setting is never silently dropped.
func readCommandConfig(path string) (commandConfig, error) {
	var cc commandConfig
	f, err := os.Open(path)
	if err != nil {
		return cc, err
	}
	defer f.Close()
	props, err := config.ReadProperties(f)
	if err != nil {
		return cc, fmt.Errorf("%s: %w", path, err)
	}
	var keys []string
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := strings.TrimSpace(props[k])
		switch k {
		case "security.protocol":
			switch strings.ToUpper(v) {
			case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
				cc.protocol = strings.ToUpper(v)
			default:
				return cc, fmt.Errorf("%s: security.protocol %q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", path, v)
			}
		case "sasl.mechanism":
			cc.mechanism = v
		case "sasl.jaas.config":
			m := jaasModuleRe.FindStringSubmatch(v)
			if m == nil {
				return cc, fmt.Errorf("%s: sasl.jaas.config is not \"<LoginModule> required username=\\\"…\\\" password=\\\"…\\\";\"", path)
			}
			oauthModule := false
			switch m[1] {
			case "org.apache.kafka.common.security.plain.PlainLoginModule", "org.apache.kafka.common.security.scram.ScramLoginModule":
			case "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule":
				oauthModule = true
				cc.unsecuredLogin = map[string]string{}
			default:
				return cc, fmt.Errorf("%s: sasl.jaas.config: login module %s is not supported (PlainLoginModule, ScramLoginModule or OAuthBearerLoginModule)", path, m[1])
			}
			// Whatever is not an option must be the closing ";": a stray
			// word or a broken quote is an error, not a lost setting.
			if rest := strings.TrimSpace(jaasOptionRe.ReplaceAllString(v[len(m[0]):], "")); rest != ";" {
				return cc, fmt.Errorf("%s: sasl.jaas.config: cannot read %q (options are name=\"value\", ending with ;)", path, rest)
			}
			for _, o := range jaasOptionRe.FindAllStringSubmatch(v[len(m[0]):], -1) {
				val := strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(o[2])
				if oauthModule {
					if !strings.HasPrefix(o[1], "unsecuredLogin") {
						return cc, fmt.Errorf("%s: sasl.jaas.config: OAuthBearerLoginModule option %s is not supported (the unsecuredLogin* options; or give a token with --sasl-token)", path, o[1])
					}
					cc.unsecuredLogin[o[1]] = val
					continue
				}
				switch o[1] {
				case "username":
					cc.user = val
				case "password":
					cc.password = val
				default:
					return cc, fmt.Errorf("%s: sasl.jaas.config: option %s is not supported (username, password)", path, o[1])
				}
			}
		case "ssl.truststore.type", "ssl.keystore.type":
			if !strings.EqualFold(v, "PEM") {
				return cc, fmt.Errorf("%s: %s %q: only PEM stores are read; convert with openssl or keytool", path, k, v)
			}
		case "ssl.truststore.location":
			cc.trustPEM = v
		case "ssl.keystore.location":
			cc.keyPEM = v
		case "ssl.endpoint.identification.algorithm":
			if !strings.EqualFold(v, "https") {
				return cc, fmt.Errorf("%s: ssl.endpoint.identification.algorithm %q: only https (host name checked) is supported", path, v)
			}
		default:
			return cc, fmt.Errorf("%s: %s is not a key gregor applies (it reads security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.type/location, ssl.keystore.type/location, ssl.endpoint.identification.algorithm)", path, k)
		}
	}
	for _, k := range []string{"ssl.truststore.location", "ssl.keystore.location"} {
		if props[k] != "" && !strings.EqualFold(props[strings.Replace(k, "location", "type", 1)], "PEM") {
			return cc, fmt.Errorf("%s: %s needs %s=PEM (JKS and PKCS12 stores are not read)", path, k, strings.Replace(k, "location", "type", 1))
		}
	}
	if strings.HasPrefix(cc.protocol, "SASL_") && cc.mechanism == "" {
		cc.mechanism = "GSSAPI" // Kafka's default, refused by saslMechanism
	}
	if cc.protocol != "" && !strings.HasPrefix(cc.protocol, "SASL_") && cc.mechanism != "" {
		return cc, fmt.Errorf("%s: sasl.mechanism is set but security.protocol %s has no SASL", path, cc.protocol)
	}
	return cc, nil
}
