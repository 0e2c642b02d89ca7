package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/nbkube/nbkube/internal/agenttoken"
)

// agentKeyFlag is --agent-token-key-file: the installation's agent token key, from which the
// manager derives the token it writes into each kernel's Secret and the API server the same
// token, without reading Secrets (package agenttoken). The file's bytes, as they are, are the
// key: the chart mounts one Secret into both.
type agentKeyFlag struct{ file string }

// agentKeyFileName is the key's file in nbkube local's data directory.
const agentKeyFileName = "agent_token_key"

func bindAgentKeyFlag(fs *flag.FlagSet) *agentKeyFlag {
	f := &agentKeyFlag{}
	fs.StringVar(&f.file, "agent-token-key-file", "", fmt.Sprintf("file with the key (at least %d bytes) that kernels' agent tokens are derived from; the manager and every API server need the same one", agenttoken.KeySize))
	return f
}

// read reads the key file, which must be given.
func (f *agentKeyFlag) read() ([]byte, error) {
	if f.file == "" {
		return nil, errors.New("--agent-token-key-file is required: the API server derives kernels' agent tokens from the key the manager has")
	}
	key, err := os.ReadFile(f.file)
	if err != nil {
		return nil, fmt.Errorf("--agent-token-key-file: %w", err)
	}
	if err := agenttoken.CheckKey(key); err != nil {
		return nil, fmt.Errorf("--agent-token-key-file %s: %w", f.file, err)
	}
	return key, nil
}

// managerKey is the manager's key: the file's, or, with no file and no API server in the
// process, one made for this run. Such a manager alone talks to the agents, and it reads
// their tokens from the Secrets; an API server, whether in the process or beside it, must
// share the key with the manager and with the other replicas, and so needs the file.
func (f *agentKeyFlag) managerKey(withAPIServer bool) ([]byte, error) {
	if f.file != "" || withAPIServer {
		return f.read()
	}
	key := make([]byte, agenttoken.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, nil
}

// readOrMakeAgentKey reads the key at path, first writing a new one there when there is
// none: nbkube local's, kept in its data directory so that kernels outlive a restart.
func readOrMakeAgentKey(path string) ([]byte, error) {
	f := &agentKeyFlag{file: path}
	return readOrMakeSecret(path, f.read, func() ([]byte, error) {
		raw := make([]byte, agenttoken.KeySize)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		return []byte(hex.EncodeToString(raw)), nil
	})
}
