package identity

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// Argon2id parameters of new hashes: OWASP's minimum for argon2id (19 MiB, two passes, one
// lane), so a verification costs tens of milliseconds, once per cache TTL per token.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// Bounds of the parameters a stored hash may ask for, so that a mistyped file cannot make
// every verification take a gigabyte or a minute.
const (
	maxArgonMemory  = 1 << 20 // KiB: 1 GiB
	maxArgonTime    = 16
	maxArgonThreads = 16
)

var b64 = base64.RawStdEncoding

// HashSecret hashes a token or password with argon2id and a random salt, in the PHC string
// format: $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func HashSecret(secret string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(secret), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// argonHash is a parsed argon2id PHC string.
type argonHash struct {
	memory    uint32
	time      uint32
	threads   uint8
	salt, key []byte
}

func parseArgon2id(encoded string) (*argonHash, error) {
	parts := strings.Split(encoded, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, hash
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return nil, errors.New("not an argon2id PHC string")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return nil, fmt.Errorf("argon2id version %q is not v=%d", parts[2], argon2.Version)
	}
	h := &argonHash{}
	var threads uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &h.memory, &h.time, &threads); err != nil {
		return nil, fmt.Errorf("argon2id parameters %q: %w", parts[3], err)
	}
	if h.memory < 8 || h.memory > maxArgonMemory || h.time < 1 || h.time > maxArgonTime || threads < 1 || threads > maxArgonThreads {
		return nil, fmt.Errorf("argon2id parameters %q out of bounds", parts[3])
	}
	h.threads = uint8(threads)
	var err error
	if h.salt, err = b64.DecodeString(parts[4]); err != nil || len(h.salt) < 8 {
		return nil, errors.New("argon2id salt is not base64 of at least 8 bytes")
	}
	if h.key, err = b64.DecodeString(parts[5]); err != nil || len(h.key) < 16 {
		return nil, errors.New("argon2id hash is not base64 of at least 16 bytes")
	}
	return h, nil
}

func isBcrypt(encoded string) bool {
	return strings.HasPrefix(encoded, "$2a$") || strings.HasPrefix(encoded, "$2b$") || strings.HasPrefix(encoded, "$2y$")
}

// CheckHash tells whether encoded is a hash VerifySecret can check: argon2id in the PHC
// format, or bcrypt ($2a$, $2b$, $2y$).
func CheckHash(encoded string) error {
	if isBcrypt(encoded) {
		_, err := bcrypt.Cost([]byte(encoded))
		return err
	}
	_, err := parseArgon2id(encoded)
	return err
}

// VerifySecret tells whether secret is the one encoded hashes, in constant time.
func VerifySecret(encoded, secret string) bool {
	if isBcrypt(encoded) {
		return bcrypt.CompareHashAndPassword([]byte(encoded), []byte(secret)) == nil
	}
	h, err := parseArgon2id(encoded)
	if err != nil {
		return false
	}
	key := argon2.IDKey([]byte(secret), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(key, h.key) == 1
}
