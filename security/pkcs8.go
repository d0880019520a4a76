package security

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// Encrypted PKCS#8 keys (RFC 5958 EncryptedPrivateKeyInfo) as openssl
// pkcs8 -topk8 -v2 writes them and Kafka's PEM key stores accept: PBES2
// with PBKDF2 (HMAC-SHA1/224/256/384/512) and AES-CBC. The older PBES1
// schemes (DES, RC2) are refused.
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF    pkix.AlgorithmIdentifier
	Cipher pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts an ENCRYPTED PRIVATE KEY block with password
// (ssl.key.password) and parses the key inside.
func decryptPKCS8(der []byte, password string) (crypto.PrivateKey, error) {
	if password == "" {
		return nil, errors.New("the PEM private key is encrypted: set ssl.key.password")
	}
	var info encryptedPrivateKeyInfo
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("parse encrypted private key: %w", err)
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key uses %v; only PBES2 (openssl pkcs8 -topk8 -v2 aes256) is supported", info.Algo.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("parse PBES2 parameters: %w", err)
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted private key derives its key with %v; only PBKDF2 is supported", p.KDF.Algorithm)
	}
	var kp pbkdf2Params
	if _, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kp); err != nil {
		return nil, fmt.Errorf("parse PBKDF2 parameters: %w", err)
	}
	var prf func() hash.Hash
	switch a := kp.PRF.Algorithm; {
	case len(a) == 0 || a.Equal(oidHMACSHA1):
		prf = sha1.New
	case a.Equal(oidHMACSHA224):
		prf = sha256.New224
	case a.Equal(oidHMACSHA256):
		prf = sha256.New
	case a.Equal(oidHMACSHA384):
		prf = sha512.New384
	case a.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("unsupported PBKDF2 hash %v", a)
	}
	var keyLen int
	switch a := p.Cipher.Algorithm; {
	case a.Equal(oidAES128CBC):
		keyLen = 16
	case a.Equal(oidAES192CBC):
		keyLen = 24
	case a.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("encrypted private key uses cipher %v; only AES-CBC is supported", a)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.Cipher.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, errors.New("bad AES-CBC parameters in the encrypted private key")
	}
	key, err := pbkdf2.Key(prf, password, kp.Salt, kp.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted private key has a bad length")
	}
	plain := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, info.Data)
	// PKCS#7 padding; a wrong password almost always breaks it.
	n := int(plain[len(plain)-1])
	if n == 0 || n > aes.BlockSize {
		return nil, errors.New("cannot decrypt the private key: wrong ssl.key.password?")
	}
	for _, b := range plain[len(plain)-n:] {
		if int(b) != n {
			return nil, errors.New("cannot decrypt the private key: wrong ssl.key.password?")
		}
	}
	k, err := x509.ParsePKCS8PrivateKey(plain[:len(plain)-n])
	if err != nil {
		return nil, fmt.Errorf("cannot decrypt the private key (wrong ssl.key.password?): %w", err)
	}
	return k, nil
}
