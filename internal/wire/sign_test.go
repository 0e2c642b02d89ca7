package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"
)

func TestSigner_SignsHMACSHA256OfTheFourDictsInLowercaseHex(t *testing.T) {
	m := streamMessage()
	mac := hmac.New(sha256.New, []byte("secret"))
	for _, part := range [][]byte{m.Header, m.ParentHeader, m.Metadata, m.Content} {
		mac.Write(part)
	}
	want := hex.EncodeToString(mac.Sum(nil))
	got := NewSigner([]byte("secret")).Sign(m.Header, m.ParentHeader, m.Metadata, m.Content)
	if string(got) != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestSigner_VerifyRejectsAnyChange(t *testing.T) {
	s := NewSigner([]byte("secret"))
	m := streamMessage()
	sig := s.Sign(m.Header, m.ParentHeader, m.Metadata, m.Content)
	if !s.Verify(sig, m.Header, m.ParentHeader, m.Metadata, m.Content) {
		t.Fatal("Verify rejects the message's own signature")
	}
	tampered := []byte(`{"name": "stdout", "text": "hello from someone else\n"}`)
	if s.Verify(sig, m.Header, m.ParentHeader, m.Metadata, tampered) {
		t.Error("Verify accepts a changed content")
	}
	// The boundaries between the parts are not signed (as in jupyter_client); what is, is
	// the concatenation in order.
	if s.Verify(sig, m.ParentHeader, m.Header, m.Metadata, m.Content) {
		t.Error("Verify accepts swapped header and parent header")
	}
	if NewSigner([]byte("other")).Verify(sig, m.Header, m.ParentHeader, m.Metadata, m.Content) {
		t.Error("Verify accepts a signature made with another key")
	}
	// jupyter_client compares with the lowercase hexdigest, so uppercase is a bad signature too.
	for _, bad := range [][]byte{nil, sig[:63], append(bytes.Clone(sig), '0'), bytes.ToUpper(sig)} {
		if s.Verify(bad, m.Header, m.ParentHeader, m.Metadata, m.Content) {
			t.Errorf("Verify accepts signature %q", bad)
		}
	}
}

func TestSigner_EmptyKeyMeansUnsigned(t *testing.T) {
	m := streamMessage()
	for name, s := range map[string]*Signer{"empty key": NewSigner(nil), "nil signer": nil} {
		if sig := s.Sign(m.Header, m.ParentHeader, m.Metadata, m.Content); len(sig) != 0 {
			t.Errorf("%s: Sign = %q, want empty", name, sig)
		}
		if !s.Verify(nil, m.Header, m.ParentHeader, m.Metadata, m.Content) {
			t.Errorf("%s: Verify rejects an empty signature", name)
		}
		signed := NewSigner([]byte("k")).Sign(m.Header, m.ParentHeader, m.Metadata, m.Content)
		if s.Verify(signed, m.Header, m.ParentHeader, m.Metadata, m.Content) {
			t.Errorf("%s: Verify accepts a non-empty signature", name)
		}
	}
}

func TestSigner_KeyIsCopied(t *testing.T) {
	key := []byte("secret")
	s := NewSigner(key)
	m := streamMessage()
	before := s.Sign(m.Header, m.ParentHeader, m.Metadata, m.Content)
	key[0] = 'X'
	if after := s.Sign(m.Header, m.ParentHeader, m.Metadata, m.Content); string(after) != string(before) {
		t.Error("changing the caller's key slice changed the signatures")
	}
}

// Run with -race: one Signer serves every socket of a kernel.
func TestSigner_ConcurrentUseGivesTheSameSignatures(t *testing.T) {
	s := NewSigner([]byte("secret"))
	m := streamMessage()
	want := string(s.Sign(m.Header, m.ParentHeader, m.Metadata, m.Content))
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				sig := s.Sign(m.Header, m.ParentHeader, m.Metadata, m.Content)
				if string(sig) != want || !s.Verify(sig, m.Header, m.ParentHeader, m.Metadata, m.Content) {
					errs <- string(sig)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for sig := range errs {
		t.Errorf("concurrent Sign = %s, want %s", sig, want)
	}
}
