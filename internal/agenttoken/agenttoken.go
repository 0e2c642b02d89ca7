// Package agenttoken derives the tokens that the nbkube agents of kernel pods and of the
// reStructuredText renderer ask of their callers, from one key per installation.
//
// The manager writes each token into the pod's Secret, where the agent reads it; the API
// server, which faces the internet, derives the same token from the key and the Kernel it
// has already read, so that it needs no access to Secrets at all. The key is held by the
// manager and the API server only, never by a kernel: a kernel knows its own token, which
// opens its own agent and nothing else, since every token names one kernel (namespace, name
// and UID: a kernel made again under an old name gets a new token).
//
// A token is base64url(HMAC-SHA256(key, purpose ‖ 0 ‖ identity)), so the derivation is fixed
// across versions: changing it, or the key, leaves the kernels already running with tokens
// that the API server no longer derives. It imports the standard library only.
package agenttoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// KeySize is the smallest key taken, in bytes: as strong as the HMAC-SHA256 it keys.
const KeySize = 32

// CheckKey refuses a key shorter than KeySize.
func CheckKey(key []byte) error {
	if len(key) < KeySize {
		return fmt.Errorf("the agent token key has %d bytes, fewer than %d", len(key), KeySize)
	}
	return nil
}

// Kernel is the agent token of the kernel named name in namespace, whose resource has uid.
func Kernel(key []byte, namespace, name, uid string) string {
	// Names hold no NUL and namespaces no '/', so no two kernels share an input.
	return derive(key, "nbkube agent token\x00"+namespace+"/"+name+"\x00"+uid)
}

// Terminal is the agent token of the terminal named name in namespace, whose resource has
// uid. A terminal and a kernel of the same name never share a token.
func Terminal(key []byte, namespace, name, uid string) string {
	return derive(key, "nbkube terminal token\x00"+namespace+"/"+name+"\x00"+uid)
}

// RSTRenderer is the token of the reStructuredText renderer of namespace. Its pods run no
// user code, so the token need not change with the renderer's objects.
func RSTRenderer(key []byte, namespace string) string {
	return derive(key, "nbkube rst renderer token\x00"+namespace)
}

func derive(key []byte, msg string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
