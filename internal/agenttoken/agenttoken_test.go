package agenttoken

import (
	"bytes"
	"encoding/base64"
	"testing"
)

var key = bytes.Repeat([]byte{7}, KeySize)

func TestKernel_IsStableURLSafeAnd256Bits(t *testing.T) {
	tok := Kernel(key, "ns", "k1", "uid-1")
	if tok != Kernel(key, "ns", "k1", "uid-1") {
		t.Fatal("the same kernel got two tokens")
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 32 {
		t.Fatalf("token %q is not 32 bytes of unpadded base64url: %v", tok, err)
	}
}

// Each part of a kernel's identity, and the key, changes the token: a kernel re-made under
// the same name, or a namespace/name split differently, never gets another's token.
func TestKernel_EveryInputChangesTheToken(t *testing.T) {
	other := bytes.Repeat([]byte{8}, KeySize)
	base := Kernel(key, "ns", "k1", "uid-1")
	for name, tok := range map[string]string{
		"key":       Kernel(other, "ns", "k1", "uid-1"),
		"namespace": Kernel(key, "ns2", "k1", "uid-1"),
		"name":      Kernel(key, "ns", "k2", "uid-1"),
		"uid":       Kernel(key, "ns", "k1", "uid-2"),
		"split":     Kernel(key, "ns/k", "1", "uid-1"),
		"renderer":  RSTRenderer(key, "ns"),
		"terminal":  Terminal(key, "ns", "k1", "uid-1"),
	} {
		if tok == base {
			t.Errorf("changing the %s kept the token", name)
		}
	}
	if RSTRenderer(key, "ns") == RSTRenderer(key, "ns2") {
		t.Error("two namespaces' renderers share a token")
	}
}

// The derivation is fixed: tokens written into kernels' Secrets by one version must be the
// ones the API server of the next derives.
func TestKernel_KnownAnswer(t *testing.T) {
	if got, want := Kernel(key, "ns", "k1", "uid-1"), knownKernelToken; got != want {
		t.Errorf("Kernel = %q, want %q", got, want)
	}
}

func TestCheckKey(t *testing.T) {
	if err := CheckKey(key); err != nil {
		t.Errorf("CheckKey(32 bytes) = %v", err)
	}
	if err := CheckKey(key[:KeySize-1]); err == nil {
		t.Error("CheckKey took a short key")
	}
}

// knownKernelToken is Kernel(key, "ns", "k1", "uid-1"), computed apart from this package:
//
//	python3 -c 'import hmac,hashlib,base64; print(base64.urlsafe_b64encode(hmac.new(bytes([7])*32,
//	  b"nbkube agent token\x00ns/k1\x00uid-1", hashlib.sha256).digest()).rstrip(b"=").decode())'
const knownKernelToken = "ULrIBk6Qnw2ThprYnyb_MAY0-TkmV5_9L_Y8H1JjD08"
