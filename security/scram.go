package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"regexp"
	"strings"

	"github.com/gregorbroker/gregor/config"
)

// ScramCredential is what a server keeps of a SCRAM user (RFC 5802
// section 3): never the password, only the salt, the iteration count and
// the keys derived from the salted password. Kafka stores the same in its
// metadata log (UserScramCredentialRecord).
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// CredentialStore looks SCRAM credentials up. ok is false for a user
// without a credential for the mechanism.
type CredentialStore interface {
	ScramCredential(mechanism, user string) (cred ScramCredential, ok bool, err error)
}

// Kafka's ScramMechanism: 4096 to 16384 iterations.
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

func scramHash(mechanism string) (func() hash.Hash, error) {
	switch mechanism {
	case config.MechanismScramSHA256:
		return sha256.New, nil
	case config.MechanismScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("%s is not a SCRAM mechanism", mechanism)
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// CredentialFromSaltedPassword derives the stored and server keys from
// SaltedPassword, which is what AlterUserScramCredentials carries.
func CredentialFromSaltedPassword(mechanism string, salted, salt []byte, iterations int) (ScramCredential, error) {
	h, err := scramHash(mechanism)
	if err != nil {
		return ScramCredential{}, err
	}
	clientKey := hmacSum(h, salted, []byte("Client Key"))
	d := h()
	d.Write(clientKey)
	return ScramCredential{
		Salt:       salt,
		StoredKey:  d.Sum(nil),
		ServerKey:  hmacSum(h, salted, []byte("Server Key")),
		Iterations: iterations,
	}, nil
}

// NewScramCredential derives a credential from a password (with a fresh
// random salt when salt is nil).
func NewScramCredential(mechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	h, err := scramHash(mechanism)
	if err != nil {
		return ScramCredential{}, err
	}
	if iterations < ScramMinIterations || iterations > ScramMaxIterations {
		return ScramCredential{}, fmt.Errorf("iterations %d is outside %d to %d", iterations, ScramMinIterations, ScramMaxIterations)
	}
	if salt == nil {
		salt = make([]byte, 32)
		rand.Read(salt)
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return ScramCredential{}, fmt.Errorf("salt password: %w", err)
	}
	return CredentialFromSaltedPassword(mechanism, salted, salt, iterations)
}

// Scram is the server side of SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802,
// RFC 7677) as Kafka's ScramSaslServer runs it: gs2 header "n" only (no
// channel binding), extensions ignored, Kafka's nonce form and iteration
// bounds.
type Scram struct {
	mechanism string
	hash      func() hash.Hash
	store     CredentialStore
	// serverNonce makes the server's part of the nonce; tests replace
	// it to replay RFC 7677's example.
	serverNonce func() (string, error)
}

// kafkaNonce is Kafka's server nonce: 130 random bits in base 36.
func kafkaNonce() (string, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 130))
	if err != nil {
		return "", fmt.Errorf("server nonce: %w", err)
	}
	return n.Text(36), nil
}

// NewScram serves mechanism with the credentials of store.
func NewScram(mechanism string, store CredentialStore) (*Scram, error) {
	h, err := scramHash(mechanism)
	if err != nil {
		return nil, err
	}
	return &Scram{mechanism: mechanism, hash: h, store: store, serverNonce: kafkaNonce}, nil
}

// Name is the mechanism's name.
func (s *Scram) Name() string { return s.mechanism }

// Start begins one client's exchange.
func (s *Scram) Start() Session { return &scramSession{m: s} }

// Kafka's ScramMessages patterns; RE2 has no class subtraction, so the
// classes are spelled out.
const (
	scramValue     = `[\x01-\x2B\x2D-\x7F]+`
	scramPrintable = `[\x21-\x2B\x2D-\x7E]+`
	scramSaslName  = `(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+`
	scramBase64    = `(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?`
	scramExts      = `(?:,[A-Za-z]+=` + scramValue + `)*`
)

var (
	clientFirstRE = regexp.MustCompile(`^n,(?:a=(` + scramSaslName + `))?,(?:m=` + scramValue + `,)?n=(` + scramSaslName + `),r=(` + scramPrintable + `)` + scramExts + `$`)
	clientFinalRE = regexp.MustCompile(`^c=(` + scramBase64 + `),r=(` + scramPrintable + `)` + scramExts + `,p=(` + scramBase64 + `)$`)
)

type scramSession struct {
	m     *Scram
	state int // 0: client-first expected, 1: client-final expected, 2: done, 3: failed
	user  string
	cred  ScramCredential
	// gs2 header, client-first-message-bare and server-first-message,
	// for the AuthMessage.
	gs2, clientFirstBare, serverFirst string
	nonce                             string // the combined nonce
}

// failed is the message Kafka gives a client for a failure whose details
// it keeps to itself (a SaslException): an unknown user, a bad proof.
func (s *scramSession) failed(err error) error {
	s.state = 3
	var ae *AuthError
	if errors.As(err, &ae) {
		return err
	}
	return fmt.Errorf("%w: %w", &AuthError{Msg: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + s.m.mechanism}, err)
}

func (s *scramSession) Step(token []byte) ([]byte, bool, error) {
	switch s.state {
	case 0:
		reply, err := s.clientFirst(string(token))
		if err != nil {
			return nil, false, s.failed(err)
		}
		s.state = 1
		return reply, false, nil
	case 1:
		reply, err := s.clientFinal(string(token))
		if err != nil {
			return nil, false, s.failed(err)
		}
		s.state = 2
		return reply, true, nil
	}
	return nil, false, s.failed(errors.New("unexpected SCRAM message after the exchange ended"))
}

// scramUsername is Kafka's ScramFormatter.username: =2C is a comma, =3D
// an equals sign, any other '=' is invalid.
func scramUsername(saslName string) (string, error) {
	u := strings.ReplaceAll(saslName, "=2C", ",")
	if strings.Contains(strings.ReplaceAll(u, "=3D", ""), "=") {
		return "", fmt.Errorf("invalid username: %s", saslName)
	}
	return strings.ReplaceAll(u, "=3D", "="), nil
}

func (s *scramSession) clientFirst(msg string) ([]byte, error) {
	m := clientFirstRE.FindStringSubmatch(msg)
	if m == nil {
		return nil, fmt.Errorf("invalid SCRAM client first message format: %q", msg)
	}
	authzid, saslName, clientNonce := m[1], m[2], m[3]
	user, err := scramUsername(saslName)
	if err != nil {
		return nil, err
	}
	cred, ok, err := s.m.store.ScramCredential(s.m.mechanism, user)
	if err != nil {
		return nil, fmt.Errorf("credentials could not be obtained: %w", err)
	}
	if !ok {
		return nil, errors.New("Authentication failed: Invalid user credentials")
	}
	if authzid != "" && authzid != user {
		return nil, authErrorf("Authentication failed: Client requested an authorization id that is different from username")
	}
	if cred.Iterations < ScramMinIterations {
		return nil, fmt.Errorf("iterations %d is less than the minimum %d for %s", cred.Iterations, ScramMinIterations, s.m.mechanism)
	}
	serverNonce, err := s.m.serverNonce()
	if err != nil {
		return nil, err
	}
	s.user, s.cred = user, cred
	gs2End := strings.Index(msg, ",n=")
	if i := strings.Index(msg, ",m="); i >= 0 && i < gs2End {
		gs2End = i
	}
	s.gs2 = msg[:gs2End+1]
	s.clientFirstBare = msg[gs2End+1:]
	s.nonce = clientNonce + serverNonce
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(cred.Salt), cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *scramSession) clientFinal(msg string) ([]byte, error) {
	m := clientFinalRE.FindStringSubmatch(msg)
	if m == nil {
		return nil, fmt.Errorf("invalid SCRAM client final message format: %q", msg)
	}
	channel, nonce, proofB64 := m[1], m[2], m[3]
	// Kafka checks only that the nonce ends with the combined one:
	// librdkafka sends its own nonce again in front of it.
	if !strings.HasSuffix(nonce, s.nonce) {
		return nil, errors.New("invalid client nonce in the final client message")
	}
	if cb, err := base64.StdEncoding.DecodeString(channel); err != nil || string(cb) != s.gs2 {
		return nil, errors.New("channel binding does not match the gs2 header")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, fmt.Errorf("client proof: %w", err)
	}
	withoutProof := msg[:strings.LastIndex(msg, ",p=")]
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	h := s.m.hash
	clientSignature := hmacSum(h, s.cred.StoredKey, []byte(authMessage))
	if len(proof) != len(clientSignature) {
		return nil, errors.New("invalid client credentials")
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSignature[i]
	}
	d := h()
	d.Write(clientKey)
	if subtle.ConstantTimeCompare(d.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, errors.New("invalid client credentials")
	}
	serverSignature := hmacSum(h, s.cred.ServerKey, []byte(authMessage))
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSignature)), nil
}

func (s *scramSession) Principal() Principal { return User(s.user) }
