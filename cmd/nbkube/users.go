package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nbkube/nbkube/internal/identity"
)

const usersUsage = `Usage:
  nbkube users hash           read a password or token from stdin, print its argon2id hash
  nbkube users token NAME     print a new API token for user NAME and its hash

The hashes go into the users file (--auth=users --users-file=...) as password_hash and
token_hash. Secrets are read from stdin, never from the command line, where other users of
the machine could see them.
`

func runUsers(_ context.Context, args []string) error {
	return users(args, os.Stdin, os.Stdout)
}

func users(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("a subcommand is required: hash or token (nbkube users help)")
	}
	switch args[0] {
	case "hash":
		if len(args) != 1 {
			return errors.New("hash reads the secret from stdin and takes no arguments")
		}
		secret, err := readSecret(stdin)
		if err != nil {
			return err
		}
		h, err := identity.HashSecret(secret)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, h)
		return nil
	case "token":
		if len(args) != 2 {
			return errors.New("token takes the user's name")
		}
		tok, err := identity.NewUserToken(args[1])
		if err != nil {
			return err
		}
		h, err := identity.HashSecret(tok)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token: %s\ntoken_hash: '%s'\n", tok, h)
		return nil
	case "-h", "--help", "help":
		_, err := io.WriteString(stdout, usersUsage)
		return err
	}
	return fmt.Errorf("unknown subcommand %q: hash or token (nbkube users help)", args[0])
}

// readSecret reads the first line of r, without its line break: `echo secret |` and a
// typed line end alike.
func readSecret(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no secret on stdin")
	}
	return line, nil
}
