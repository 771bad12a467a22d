package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/internal/atomicfile"
)

// newTokensCmd is `isobar tokens`: Pulsar's `pulsar tokens` commands, with
// its names and file formats, so keys and tokens made by either work with
// the other.
func newTokensCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Make and check authentication tokens (Pulsar's `pulsar tokens`)",
		Long: `Make signing keys and tokens, and check tokens, as Pulsar's "pulsar tokens"
does and in its file formats: a secret key is its raw bytes (or base64 with
--base64), a key pair is PKCS #8 and X.509 DER. Keys are given as a path,
file:///path, data:;base64,<base64> or env:NAME. docs/security.md shows
how a broker is set up to check them.`,
	}
	cmd.AddCommand(newTokensSecretKeyCmd(), newTokensKeyPairCmd(), newTokensCreateCmd(), newTokensShowCmd(), newTokensValidateCmd())
	return cmd
}

func newTokensSecretKeyCmd() *cobra.Command {
	var output string
	var b64 bool
	var alg string
	cmd := &cobra.Command{
		Use:   "create-secret-key",
		Short: "Make a random secret key (HS256)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if alg != auth.HS256 {
				return usageError{fmt.Errorf("--signature-algorithm: %q: a secret key signs HS256", alg)}
			}
			key := auth.NewSecretKey()
			if b64 {
				key = []byte(base64.StdEncoding.EncodeToString(key))
			}
			if output == "" {
				_, err := cmd.OutOrStdout().Write(key)
				return err
			}
			return writeSecret(output, key)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write the key to (default: standard output)")
	cmd.Flags().BoolVarP(&b64, "base64", "b", false, "write the key in base64 rather than as raw bytes")
	cmd.Flags().StringVarP(&alg, "signature-algorithm", "a", auth.HS256, "signature algorithm (HS256)")
	return cmd
}

func newTokensKeyPairCmd() *cobra.Command {
	var priv, pub, alg string
	cmd := &cobra.Command{
		Use:   "create-key-pair",
		Short: "Make a key pair (RS256 or ES256): the private key signs tokens, brokers check them with the public key",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if priv == "" || pub == "" {
				return usageError{errors.New("--output-private-key and --output-public-key are required")}
			}
			p, q, err := auth.NewKeyPair(alg)
			if err != nil {
				return usageError{err}
			}
			if err := writeSecret(priv, p); err != nil {
				return err
			}
			return atomicfile.Write(pub, q, 0o644)
		},
	}
	cmd.Flags().StringVar(&priv, "output-private-key", "", "file to write the private key to (PKCS #8 DER)")
	cmd.Flags().StringVar(&pub, "output-public-key", "", "file to write the public key to (X.509 DER)")
	cmd.Flags().StringVarP(&alg, "signature-algorithm", "a", auth.RS256, "RS256 or ES256")
	return cmd
}

func newTokensCreateCmd() *cobra.Command {
	var subject, expiry, secret, private, alg string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make a token for a role, signed with a secret key or a private key",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if subject == "" {
				return usageError{errors.New("--subject (the role) is required")}
			}
			if (secret == "") == (private == "") {
				return usageError{errors.New("give exactly one of --secret-key and --private-key")}
			}
			var exp time.Time
			if expiry != "" {
				secs, err := parseRelativeTime(expiry)
				if err != nil || secs <= 0 || secs > 100*365*86400 {
					return usageError{fmt.Errorf("--expiry-time: %q: want a positive time of at most 100y, like 30d or 1y (%v)", expiry, err)}
				}
				exp = time.Now().Add(time.Duration(secs) * time.Second)
			}
			source := secret
			if source == "" {
				source = private
			}
			key, err := auth.ReadKey(source)
			if err != nil {
				return usageError{err}
			}
			if secret != "" {
				alg = auth.HS256
			} else if alg == "" {
				alg, err = keyAlgorithm(key)
				if err != nil {
					return usageError{err}
				}
			}
			tok, err := auth.Sign(alg, key, subject, exp)
			if err != nil {
				return usageError{err}
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	cmd.Flags().StringVarP(&subject, "subject", "s", "", "the role the token authenticates")
	cmd.Flags().StringVarP(&expiry, "expiry-time", "e", "", "how long the token is valid: a number and s, m, h, d, w or y (e.g. 1y); default: no expiry")
	cmd.Flags().StringVar(&secret, "secret-key", "", "the secret key (path, file:///path, data:;base64,..., env:NAME)")
	cmd.Flags().StringVar(&private, "private-key", "", "the private key (path, file:///path, data:;base64,..., env:NAME)")
	cmd.Flags().StringVarP(&alg, "signature-algorithm", "a", "", "with --private-key: RS256 or ES256 (default: the key's)")
	return cmd
}

// keyAlgorithm is the algorithm a private key signs.
func keyAlgorithm(key []byte) (string, error) {
	k, err := auth.ParsePrivateKey(key)
	if err != nil {
		return "", err
	}
	if strings.Contains(fmt.Sprintf("%T", k), "ecdsa") {
		return auth.ES256, nil
	}
	return auth.RS256, nil
}

// tokenInput reads the token of show and validate: -i, -f or --stdin.
type tokenInput struct {
	token, file string
	stdin       bool
}

func (ti *tokenInput) flags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&ti.token, "token", "i", "", "the token")
	cmd.Flags().StringVarP(&ti.file, "token-file", "f", "", "a file holding the token")
	cmd.Flags().BoolVar(&ti.stdin, "stdin", false, "read the token from standard input")
}

func (ti *tokenInput) read(cmd *cobra.Command) (string, error) {
	n := 0
	for _, set := range []bool{ti.token != "", ti.file != "", ti.stdin} {
		if set {
			n++
		}
	}
	if n != 1 {
		return "", usageError{errors.New("give the token with exactly one of -i, -f and --stdin")}
	}
	switch {
	case ti.file != "":
		b, err := os.ReadFile(ti.file)
		if err != nil {
			return "", usageError{err}
		}
		return strings.TrimSpace(string(b)), nil
	case ti.stdin:
		b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), auth.MaxTokenBytes+1))
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	return ti.token, nil
}

func newTokensShowCmd() *cobra.Command {
	var ti tokenInput
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print a token's header and claims (without checking its signature)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := ti.read(cmd)
			if err != nil {
				return err
			}
			h, c, err := auth.Unverified(tok)
			if err != nil {
				return err
			}
			hb, _ := json.Marshal(h)
			cb, _ := json.Marshal(c)
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n---\n%s\n", hb, cb)
			return nil
		},
	}
	ti.flags(cmd)
	return cmd
}

func newTokensValidateCmd() *cobra.Command {
	var ti tokenInput
	var cfg auth.TokenConfig
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a token's signature and expiry; print its role, exit 1 if it is refused",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := ti.read(cmd)
			if err != nil {
				return err
			}
			v, err := auth.NewVerifier(cfg)
			if err != nil {
				return usageError{err}
			}
			c, err := v.Verify(tok)
			if err != nil {
				return err
			}
			exp := "never"
			if !c.Expires.IsZero() {
				exp = c.Expires.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "valid: role %s, expires %s\n", c.Role, exp)
			return nil
		},
	}
	ti.flags(cmd)
	cmd.Flags().StringVar(&cfg.SecretKey, "secret-key", "", "the secret key that signed it")
	cmd.Flags().StringVar(&cfg.PublicKey, "public-key", "", "the public key of the private key that signed it")
	cmd.Flags().StringVar(&cfg.RoleClaim, "role-claim", "", "the claim naming the role (default sub)")
	return cmd
}

// writeSecret writes key material readable by its owner only.
// writeSecret writes a key or token readable by its owner only, whole
// (atomicfile), also over a file that was readable by others.
func writeSecret(path string, b []byte) error {
	return atomicfile.Write(path, b, 0o600)
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", args)}
	}
	return nil
}
