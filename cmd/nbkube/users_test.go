package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/internal/identity"
)

func TestUsersHash_HashesTheSecretFromStdin(t *testing.T) {
	var out bytes.Buffer
	if err := users([]string{"hash"}, strings.NewReader("pass word\n"), &out); err != nil {
		t.Fatal(err)
	}
	h := strings.TrimSpace(out.String())
	if !strings.HasPrefix(h, "$argon2id$v=19$") || !identity.VerifySecret(h, "pass word") {
		t.Errorf("hash %q", h)
	}
	if err := users([]string{"hash"}, strings.NewReader("\n"), &out); err == nil {
		t.Errorf("an empty secret was hashed")
	}
	if err := users([]string{"hash", "secret-on-the-command-line"}, strings.NewReader("x\n"), &out); err == nil {
		t.Errorf("a secret from argv was accepted")
	}
}

func TestUsersToken_PrintsATokenAndItsHash(t *testing.T) {
	var out bytes.Buffer
	if err := users([]string{"token", "ann"}, strings.NewReader(""), &out); err != nil {
		t.Fatal(err)
	}
	var tok, hash string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "token":
			tok = v
		case "token_hash":
			hash = strings.Trim(v, "'")
		}
	}
	if !strings.HasPrefix(tok, "nbk_ann_") || !identity.VerifySecret(hash, tok) {
		t.Errorf("token %q, hash %q", tok, hash)
	}
}
