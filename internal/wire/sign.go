package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// Signer signs and verifies ZMQ messages with HMAC-SHA256 over header, parent header,
// metadata and content, as jupyter_client's Session does with signature_scheme
// "hmac-sha256" (the only scheme kernels are started with by nbkube). An empty key means
// unsigned messages: the signature is "". A Signer is safe for concurrent use; a nil
// *Signer behaves as one with an empty key.
type Signer struct {
	key []byte
	// macs pools keyed HMAC states (*keyedMAC): hmac.New hashes the key twice and allocates,
	// which would be most of the cost of signing a small message.
	macs sync.Pool
}

// keyedMAC is a pooled HMAC state with room for its digest, which would otherwise escape to
// the heap through the hash.Hash interface on every message.
type keyedMAC struct {
	hash.Hash
	sum [sha256.Size]byte
}

// NewSigner returns a Signer for key (copied).
func NewSigner(key []byte) *Signer {
	s := &Signer{key: bytes.Clone(key)}
	s.macs.New = func() any { return &keyedMAC{Hash: hmac.New(sha256.New, s.key)} }
	return s
}

func (s *Signer) unsigned() bool { return s == nil || len(s.key) == 0 }

// Sign returns the lowercase hex HMAC of the four parts, or nil when the key is empty.
func (s *Signer) Sign(header, parent, metadata, content []byte) []byte {
	if s.unsigned() {
		return nil
	}
	sig := make([]byte, hex.EncodedLen(sha256.Size))
	s.hexDigest(sig, header, parent, metadata, content)
	return sig
}

// Verify reports whether sig is the signature of the four parts, in constant time. With an
// empty key only an empty signature is valid.
func (s *Signer) Verify(sig, header, parent, metadata, content []byte) bool {
	if s.unsigned() {
		return len(sig) == 0
	}
	var want [2 * sha256.Size]byte
	s.hexDigest(want[:], header, parent, metadata, content)
	return hmac.Equal(sig, want[:])
}

// hexDigest writes the hex HMAC of the parts into dst, which has room for it.
func (s *Signer) hexDigest(dst, header, parent, metadata, content []byte) {
	mac := s.macs.Get().(*keyedMAC)
	mac.Reset()
	mac.Write(header)
	mac.Write(parent)
	mac.Write(metadata)
	mac.Write(content)
	hex.Encode(dst, mac.Sum(mac.sum[:0]))
	s.macs.Put(mac)
}
