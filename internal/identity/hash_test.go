package identity_test

import (
	"regexp"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/nbkube/nbkube/internal/identity"
)

func TestHashSecret_IsArgon2idInPHCFormatAndVerifies(t *testing.T) {
	h, err := identity.HashSecret("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`).MatchString(h) {
		t.Errorf("hash %q is not argon2id's PHC string", h)
	}
	if err := identity.CheckHash(h); err != nil {
		t.Errorf("CheckHash: %v", err)
	}
	if !identity.VerifySecret(h, "s3cret") || identity.VerifySecret(h, "s3cret ") || identity.VerifySecret(h, "") {
		t.Errorf("verification of %q", h)
	}
	if h2, _ := identity.HashSecret("s3cret"); h2 == h {
		t.Errorf("two hashes of one secret are equal: no salt")
	}
}

func TestVerifySecret_AcceptsBcrypt(t *testing.T) {
	for _, prefix := range []string{"$2a$", "$2b$"} {
		b, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		h := prefix + string(b[4:])
		if err := identity.CheckHash(h); err != nil {
			t.Errorf("%s: %v", prefix, err)
		}
		if !identity.VerifySecret(h, "pw") || identity.VerifySecret(h, "pW") {
			t.Errorf("%s: verification", prefix)
		}
	}
}

func TestCheckHash_RefusesWhatItCannotVerify(t *testing.T) {
	for _, h := range []string{
		"",
		"plaintext",
		"$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g",
		"$argon2id$v=16$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g",
		// A terabyte of memory per verification.
		"$argon2id$v=19$m=1073741824,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g",
		"$argon2id$v=19$m=19456,t=2,p=1$!!$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g",
		"$2b$04$short",
	} {
		if err := identity.CheckHash(h); err == nil {
			t.Errorf("CheckHash(%q) accepted it", h)
		}
		if identity.VerifySecret(h, "x") {
			t.Errorf("VerifySecret(%q) accepted a secret", h)
		}
	}
}
